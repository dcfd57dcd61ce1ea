#!/usr/bin/env bash
# The project's test command (README "Run the tests"; CI runs exactly this):
#   scripts/test.sh          formatting, clippy, and every test; GPU tests are listed as ignored
#   scripts/test.sh --gpu    the same in release mode with the GPU tests included (GPU runner)
# Needs the pinned toolchain (`rustup toolchain install`) and a CUDA root: an installed toolkit,
# or `scripts/fetch-cuda-deps.sh` (link-time libcuda, libdevice and ptxas in .deps/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
gpu=0
for arg in "$@"; do
  case "$arg" in
    --gpu) gpu=1 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "scripts/test.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done
# A machine without the NVIDIA driver has no libcuda.so.1 for the test executables to load:
# there scripts/fetch-cuda-deps.sh made .deps/cuda/no-driver (cuInit then fails cleanly and
# GPU tests stay ignored). .cargo/config.toml points LD_LIBRARY_PATH at it, but an
# LD_LIBRARY_PATH already set wins there, so add the folder here too where it exists.
if [[ -d .deps/cuda/no-driver ]]; then
  export LD_LIBRARY_PATH=$PWD/.deps/cuda/no-driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
set -x
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
if [[ $gpu == 1 ]]; then
  cargo test --workspace --release -- --include-ignored --test-threads=1
else
  cargo test --workspace
fi
