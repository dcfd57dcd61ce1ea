#!/usr/bin/env bash
# Fetches the two pieces of NVIDIA's CUDA toolkit that building and testing need, on a machine
# without the toolkit, into .deps/cuda (laid out like a CUDA root; nothing is installed
# system-wide):
#   nvvm/libdevice/libdevice.10.bc  the sinf/cosf that nvcc uses, linked into the kernels
#   bin/ptxas                       assembles the PTX for sm_75/sm_80/sm_90 in tests/ptx.rs
# Both come from NVIDIA's PyPI wheel nvidia-cuda-nvcc-cu12 (unzipped, not installed). The build
# fetches libdevice the same way by itself when it finds none (kernels-build); this script is
# for ptxas and for machines that prefer to fetch ahead. The driver library (libcuda.so.1) is
# not needed to build: streamlab loads it at run time. Idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.deps/cuda"
if [[ -e "$dest/nvvm/libdevice/libdevice.10.bc" && -x "$dest/bin/ptxas" ]]; then
  echo "fetch-cuda-deps: $dest already complete"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dest/nvvm/libdevice" "$dest/bin"
python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
  --python-version 3.11 -d "$work/wheel" nvidia-cuda-nvcc-cu12==12.9.86
whl=$(ls "$work"/wheel/*.whl)
(cd "$work" && python3 -m zipfile -e "$whl" unz)
cp "$(find "$work/unz" -path '*nvvm/libdevice/libdevice.10.bc' | head -n1)" "$dest/nvvm/libdevice/"
cp "$(find "$work/unz" -path '*bin/ptxas' | head -n1)" "$dest/bin/ptxas"
chmod +x "$dest/bin/ptxas"
echo "fetch-cuda-deps: ready in $dest"
