#!/usr/bin/env bash
# remat as other projects use it (label package):
#   installed  cmake --install of BUILD into WORK/prefix, then a consumer
#              project built with find_package(remat CONFIG) and the same
#              program built with pkg-config; both run
#              and each prints the same gemm line as the build's
#              `remat --version` and the installed one (one GEMM choice)
#   subdirectory  a consumer project with add_subdirectory(remat source),
#              built (the CPU libraries it needs only) and run
#   tests/package/run.sh installed|subdirectory SOURCE BUILD WORK
set -euo pipefail
mode=$1 source=$2 build=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# Through ccache where it is, as scripts/build.sh builds: the files that
# compile alike in both builds come from the build tree's objects (this
# test took 24.6 s instead of 35.9 on the Intel Xeon).
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# The gemm line of a program's output, held to the build's remat's.
expected_gemm=$("$build/remat" --version | grep '^gemm:')
same_gemm() {  # NAME OUTPUT
  local line
  line=$(grep '^gemm:' <<<"$2" || true)
  if [[ "$line" != "$expected_gemm" ]]; then
    echo "FAIL: $1 runs another GEMM: '$line', where remat --version says '$expected_gemm'" >&2
    exit 1
  fi
  echo "$1: $line"
}

case $mode in
  installed)
    cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
    test -f "$work/prefix/include/remat/engine/tensor.h"
    test -x "$work/prefix/bin/remat"
    cmake -S "$here/installed" -B "$work/cmake" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
          -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log"
    cmake --build "$work/cmake" >"$work/build.log"
    same_gemm "installed remat --version" "$("$work/prefix/bin/remat" --version)"
    output=$("$work/cmake/gpt_steps")
    echo "$output"
    same_gemm "find_package program" "$output"
    # pkg-config, from the prefix's .pc file alone
    pc_dir=$(dirname "$(find "$work/prefix" -name remat.pc)")
    flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs remat)
    ${CXX:-c++} -O1 "$here/gpt_steps.cpp" -o "$work/gpt_steps_pkgconfig" $flags
    output=$("$work/gpt_steps_pkgconfig")
    echo "$output"
    same_gemm "pkg-config program" "$output"
    ;;
  subdirectory)
    cmake -S "$here/subdirectory" -B "$work/cmake" "${generator[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release \
          -DREMAT_SOURCE_DIR="$source" >"$work/configure.log"
    cmake --build "$work/cmake" --target matmul_grad -j 2 >"$work/build.log"
    "$work/cmake/matmul_grad"
    ;;
  *) echo "usage: $0 installed|subdirectory SOURCE BUILD WORK" >&2; exit 2 ;;
esac
