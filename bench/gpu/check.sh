#!/usr/bin/env bash
# The check for a GPU machine (one GPU, a fresh Debian with the CUDA toolkit):
# installs what is missing (scripts/setup.sh), builds everything into
# build-gpu/, runs the unit tests and the NCCL tests (tests/comm/nccl_test.cpp)
# under mpirun, and writes gpu_check.json and the logs into $OUT (else the
# current directory). No `set -e`: the JSON is written whatever fails.
#   OUT=/tmp/out bench/gpu/check.sh
set -u
out=$(cd "${OUT:-.}" && pwd)
cd "$(dirname "$0")/../.."

scripts/setup.sh
setup_rc=$?
gpu=$(nvidia-smi -L 2>&1 | head -n 1)

build_ok=false
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build-gpu && build_ok=true
mkdir -p build-gpu

ctest --test-dir build-gpu -L unit -j8 --output-on-failure >build-gpu/unit.log 2>&1
# "97% tests passed, 3 tests failed out of 100"; absent if nothing ran.
summary=$(grep -E '[0-9]+ tests failed out of [0-9]+' build-gpu/unit.log | tail -n 1)
unit_failed=$(sed -nE 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/p' <<<"$summary")
unit_total=$(sed -nE 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/p' <<<"$summary")
unit_passed=null
if [[ -n "$unit_total" ]]; then unit_passed=$((unit_total - unit_failed)); else unit_failed=null; fi

mpirun --allow-run-as-root --oversubscribe -np 1 build-gpu/tests/test_comm --gtest_filter='Nccl*' --gtest_color=no \
  >build-gpu/nccl.log 2>&1
nccl_rc=$?
# rc 0 also when every test skipped (no GPU seen): count both.
nccl_passed=$(sed -nE 's/.*\[  PASSED  \] ([0-9]+) tests?.*/\1/p' build-gpu/nccl.log | tail -n 1)
nccl_skipped=$(sed -nE 's/.*\[  SKIPPED \] ([0-9]+) tests?, listed below.*/\1/p' build-gpu/nccl.log | tail -n 1)

cp build-gpu/unit.log build-gpu/nccl.log "$out"/ 2>/dev/null
cat >"$out/gpu_check.json" <<JSON
{
  "nvidia_smi": "$(sed 's/[\\"]/\\&/g' <<<"$gpu")",
  "setup_rc": $setup_rc,
  "build_ok": $build_ok,
  "unit_tests_passed": $unit_passed,
  "unit_tests_failed": $unit_failed,
  "nccl_tests_rc": $nccl_rc,
  "nccl_tests_passed": ${nccl_passed:-0},
  "nccl_tests_skipped": ${nccl_skipped:-0},
  "seconds": $SECONDS
}
JSON
cat "$out/gpu_check.json"
