#!/usr/bin/env bash
# Fetches what a build needs from CUDA on a machine without the CUDA toolkit, into
# .deps/cuda (laid out like a CUDA root, which is what cust's build script and ours expect):
#   lib64/libcuda.so       link-time driver library (Debian package libcuda1, non-free)
#   no-driver/libcuda.so.1 the same library for *running* tests, only on a machine without the
#                          NVIDIA driver: there it loads and cuInit reports "no device", so GPU
#                          tests are skipped honestly. .cargo/config.toml points
#                          LD_LIBRARY_PATH here; on a machine with a driver the folder is absent
#                          and the driver's own libcuda.so.1 is used.
#   nvvm/libdevice/        NVIDIA's libdevice.10.bc, the sinf/cosf that nvcc uses
#   bin/ptxas              to check the PTX assembles for sm_75/sm_80/sm_90 without a GPU
# Nothing is installed system-wide. Idempotent: does nothing if everything is present.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.deps/cuda"
has_driver() { ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; }
runtime_ok() { has_driver || [[ -e "$dest/no-driver/libcuda.so.1" ]]; }
if [[ -e "$dest/lib64/libcuda.so" && -e "$dest/nvvm/libdevice/libdevice.10.bc" && -x "$dest/bin/ptxas" ]] && runtime_ok; then
  echo "fetch-cuda-deps: $dest already complete"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dest/lib64" "$dest/nvvm/libdevice" "$dest/bin"

# 1. libcuda from Debian non-free, with a private apt list (nothing installed).
if [[ ! -e "$dest/lib64/libcuda.so" ]]; then
  mkdir -p "$work/apt/lists/partial" "$work/debs"
  . /etc/os-release
  echo "deb http://deb.debian.org/debian ${VERSION_CODENAME:-bookworm} main non-free" > "$work/apt/sources.list"
  apt_opts=(-o Dir::Etc::SourceList="$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o Dir::State::Lists="$work/apt/lists" -o APT::Architecture=amd64 -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
  apt-get "${apt_opts[@]}" -qq update
  (cd "$work/debs" && apt-get "${apt_opts[@]}" -qq download libcuda1)
  dpkg -x "$work"/debs/libcuda1_*.deb "$work/libcuda"
  so=$(find "$work/libcuda" -name 'libcuda.so.*.*' -type f | head -n1)
  [[ -n "$so" ]] || { echo "fetch-cuda-deps: libcuda1 package has no libcuda.so" >&2; exit 1; }
  cp "$so" "$dest/lib64/"
  ln -sf "$(basename "$so")" "$dest/lib64/libcuda.so"
fi
if ! has_driver && [[ ! -e "$dest/no-driver/libcuda.so.1" ]]; then
  mkdir -p "$dest/no-driver"
  ln -sf "../lib64/$(basename "$(readlink -f "$dest/lib64/libcuda.so")")" "$dest/no-driver/libcuda.so.1"
fi

# 2. libdevice and ptxas from NVIDIA's PyPI wheel (no install: unzip two files).
if [[ ! -e "$dest/nvvm/libdevice/libdevice.10.bc" || ! -x "$dest/bin/ptxas" ]]; then
  python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
    --python-version 3.11 -d "$work/wheel" nvidia-cuda-nvcc-cu12==12.9.86
  whl=$(ls "$work"/wheel/*.whl)
  (cd "$work" && python3 -m zipfile -e "$whl" unz)
  cp "$(find "$work/unz" -path '*nvvm/libdevice/libdevice.10.bc' | head -n1)" "$dest/nvvm/libdevice/"
  cp "$(find "$work/unz" -path '*bin/ptxas' | head -n1)" "$dest/bin/ptxas"
  chmod +x "$dest/bin/ptxas"
fi
echo "fetch-cuda-deps: ready in $dest"
