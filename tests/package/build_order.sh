#!/usr/bin/env bash
# The README's two commands in either order (issue 31): a build folder
# configured before the Python environment existed (the main job first)
# builds the module once scripts/setup_py.sh has made it (the test command
# after), because REMAT_BUILD_PYTHON=AUTO is decided at every configure.
#   tests/package/build_order.sh SOURCE VENV WORK
set -euo pipefail
source=$1 venv=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
options=(-DREMAT_CUDA=OFF -DREMAT_BUILD_TESTS=OFF -DREMAT_BUILD_BENCH=OFF -DREMAT_BUILD_EXAMPLES=OFF
         "-DREMAT_PYTHON_VENV=$work/venv")
command -v ninja >/dev/null && options+=(-G Ninja)

cmake -S "$source" -B "$work/build" "${options[@]}" >"$work/first.log"
grep -F "the Python module: off (AUTO" "$work/first.log" || { cat "$work/first.log"; exit 1; }
ln -s "$venv" "$work/venv"  # what scripts/setup_py.sh makes
cmake -S "$source" -B "$work/build" >"$work/second.log"  # scripts/build.sh passes nothing more
grep -F "the Python module: on (AUTO" "$work/second.log" || { cat "$work/second.log"; exit 1; }
cmake --build "$work/build" --target help >"$work/targets.txt"
grep '_remat' "$work/targets.txt" >/dev/null || { echo "FAIL: no target _remat"; exit 1; }
echo "configured before the environment: off; after: on, with target _remat"
