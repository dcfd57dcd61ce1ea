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
# use the fetched one there (cuInit then fails cleanly, and GPU tests stay ignored). Never
# where a driver is installed: its own libcuda must be the one loaded.
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  if [[ -e .deps/cuda/lib64/libcuda.so.1 ]]; then
    export LD_LIBRARY_PATH=$PWD/.deps/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
fi
set -x
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
if [[ $gpu == 1 ]]; then
  cargo test --workspace --release -- --include-ignored --test-threads=1
else
  cargo test --workspace
fi
