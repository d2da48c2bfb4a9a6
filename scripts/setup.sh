#!/usr/bin/env bash
# Installs every Debian package remat needs to build, test and benchmark,
# idempotently: packages already installed are left alone, and apt-get update
# runs only when something is missing. Runs as root (CI) or through sudo.
#   scripts/setup.sh
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config   # toolchain
  ccache                                         # compiler cache (scripts/build.sh, tests/package/pip.sh)
  libblis-dev libblis-openmp-dev                 # GEMM: BLIS, its OpenMP build (kernels/cpu/gemm_library.h)
  libdnnl-dev                                    # float32 GEMM on AVX-512: oneDNN (kernels/cpu/gemm_library.h)
  libopenblas0-pthread                           # libblas.so.3 for Debian's PyTorch (bench/torch_reference.py)
  libgtest-dev libgmock-dev libbenchmark-dev     # tests and benchmarks
  libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  coinor-libcbc-dev                              # the milp policy's solver (COIN-OR CBC)
  libopenmpi-dev openmpi-bin                     # the MPI communicator (comm/)
  dataset-fashion-mnist bible-kjv                # data (no downloads at run time)
  python3-torch python3-numpy                    # bench/torch_reference.py
  python3-dev python3-venv                       # the Python module (python/, scripts/setup_py.sh)
  python3-matplotlib                             # tools/plot_tradeoff.py
  graphviz                                       # DOT graphs to SVG (remat tradeoff, docs/tour)
  clang-14 libclang-rt-14-dev libomp-14-dev      # sanitizers and libFuzzer (scripts/sanitize.sh, fuzz.sh)
  llvm-14                                        # llvm-symbolizer: sanitizer reports with file:line
)

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
  if [[ "$status" != "installed" ]]; then
    missing+=("$package")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} packages are installed"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: not root and no sudo; install them as root with: apt-get install ${missing[*]}" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
