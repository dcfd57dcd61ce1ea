#!/usr/bin/env bash
# The project's test command (README "Run the tests"; CI runs exactly this). On any Linux
# machine with rustup and python3 it installs what it needs, then checks everything:
#   scripts/test.sh          formatting, clippy, and every test; GPU tests are listed as ignored
#   scripts/test.sh --gpu    the same in release mode with the GPU tests included (GPU runner)
# What it installs: the nightly pinned in rust-toolchain.toml (rustup), and NVIDIA's libdevice
# and ptxas into .deps/cuda (scripts/fetch-cuda-deps.sh) where no CUDA toolkit is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
gpu=0
for arg in "$@"; do
  case "$arg" in
    --gpu) gpu=1 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "scripts/test.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done
rustup toolchain install            # what rust-toolchain.toml pins; a no-op when present
if [[ ! -x /usr/local/cuda/bin/ptxas && ! -x ${CUDA_HOME:-/nonexistent}/bin/ptxas ]]; then
  bash scripts/fetch-cuda-deps.sh
fi
set -x
cargo fmt --all -- --check
# The lesson modules are declared inside the `lessons!` macro, which cargo fmt does not follow.
rustfmt --edition 2021 --check host/src/lessons/*.rs
cargo clippy --workspace --all-targets -- -D warnings
if [[ $gpu == 1 ]]; then
  cargo test --workspace --release -- --include-ignored --test-threads=1
else
  cargo test --workspace
fi
