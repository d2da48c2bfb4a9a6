#!/usr/bin/env bash
# The check for a GPU machine: runs the NCCL tests (tests/comm/nccl_test.cpp)
# under mpirun, the CUDA tests (suites Cuda*: every kernel and op against the
# CPU, tensors and the allocator on the GPU; a short subset again under
# compute-sanitizer memcheck where the machine has it), W1, W2 and W3 under
# `remat bench --device cuda` and W2 and W3 in PyTorch (bench/gpu/torch_gpu.py),
# and writes gpu_check.json and the logs into
# $OUT (else the current directory). Two ways to get the programs:
#  - build-gpu/remat-gpu.tar.xz present (bench/gpu/bundle.sh, made where the
#    CUDA toolkit and scripts/setup.sh's packages are): unpacked and run as
#    is, with the machine's own NCCL. For a GPU machine with no package
#    registry, such as the one lent to this project's sessions.
#  - otherwise: installs what is missing (scripts/setup.sh), builds
#    everything into build-gpu/ and runs the unit tests too.
# No `set -e`: the JSON is written whatever fails.
#   OUT=/tmp/out bench/gpu/check.sh
set -u
mkdir -p "${OUT:-.}" && out=$(cd "${OUT:-.}" && pwd) || exit 1
cd "$(dirname "$0")/../.."
logs=$(mktemp -d)

gpu=$(nvidia-smi -L 2>&1 | head -n 1)
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

# "97% tests passed, 3 tests failed out of 100" -> "97 3"; "null null" if absent.
ctest_counts() {
  local summary
  summary=$(grep -E '[0-9]+ tests failed out of [0-9]+' "$1" | tail -n 1)
  if [[ "$summary" =~ ([0-9]+)\ tests\ failed\ out\ of\ ([0-9]+) ]]; then
    echo "$((BASH_REMATCH[2] - BASH_REMATCH[1])) ${BASH_REMATCH[1]}"
  else
    echo "null null"
  fi
}
# GoogleTest's "[  PASSED  ] 8 tests." and "[  SKIPPED ] 1 test, listed below:"
# (rank 0's: under mpirun the other ranks print only their failures).
gtest_count() {
  local count
  count=$(sed -nE "s/.*\[  $2 *\] ([0-9]+) tests?[.,].*/\1/p" "$1" | tail -n 1)
  echo "${count:-0}"
}
json_string() { printf '"%s"' "$(sed 's/[\\"]/\\&/g' <<<"$1" | tr -d '\000-\037')"; }

bundle=build-gpu/remat-gpu.tar.xz
unit_passed=null unit_failed=null setup_rc=null build_ok=false missing_libraries="" built_from=""
if [[ -f "$bundle" ]]; then
  mode=bundle
  unpacked=$(mktemp -d)
  tar -C "$unpacked" -xJf "$bundle" && build_ok=true
  root=$unpacked/remat-gpu
  nccl=$(find /usr/local/cuda*/lib* /usr/lib/x86_64-linux-gnu /usr/local/lib /opt -name 'libnccl.so.2*' 2>/dev/null | head -n 1)
  export PATH=$root/bin:$PATH
  export LD_LIBRARY_PATH=$root/lib${nccl:+:$(dirname "$nccl")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # Open MPI and PMIx look for their plugins and help files where Debian put
  # them unless told otherwise.
  export OPAL_PREFIX=$root OPAL_BINDIR=$root/bin OPAL_LIBDIR=$root/lib OPAL_PKGLIBDIR=$root/lib/openmpi
  export OPAL_PKGDATADIR=$root/share-openmpi OPAL_SYSCONFDIR=$root/etc/openmpi
  export PMIX_PREFIX=$root PMIX_PKGLIBDIR=$root/lib/pmix PMIX_PKGDATADIR=$root/share-pmix
  test_comm=$root/bin/test_comm
  bin=$root/bin
  # cuBLAS and the CUDA runtime of the machine's CUDA 13 (the toolkit, or the
  # nvidia-* wheels that PyTorch brings).
  for soname in libcublas.so.13 libcudart.so.13; do
    found=$(timeout 120 find /usr/local /usr/lib /opt /root -name "$soname*" 2>/dev/null | head -n 1)
    [[ -n "$found" ]] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(dirname "$found")
  done
  built_from=$(cat "$root/COMMIT" 2>/dev/null)
  missing_libraries=$(ldd "$test_comm" 2>&1 | awk '/not found/ {print $1}' | tr '\n' ' ')
else
  mode=build
  nccl=""
  built_from=$(git rev-parse --short HEAD 2>/dev/null)
  scripts/setup.sh
  setup_rc=$?
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build-gpu && build_ok=true
  ctest --test-dir build-gpu -L unit -j8 --output-on-failure >"$logs/unit.log" 2>&1
  read -r unit_passed unit_failed < <(ctest_counts "$logs/unit.log")
  test_comm=build-gpu/tests/test_comm
  bin=build-gpu/tests
  ln -sf ../remat build-gpu/tests/remat 2>/dev/null
fi

# The CUDA tests, each program on its own (a crash in one leaves the others).
cuda_passed=0 cuda_failed=0 cuda_skipped=0
for program in test_kernels test_engine test_ops test_nn test_optim test_scheduler; do
  timeout 600 "$bin/$program" --gtest_filter='Cuda*' --gtest_color=no >"$logs/cuda_$program.log" 2>&1
  cuda_passed=$((cuda_passed + $(gtest_count "$logs/cuda_$program.log" PASSED)))
  cuda_failed=$((cuda_failed + $(gtest_count "$logs/cuda_$program.log" FAILED)))
  cuda_skipped=$((cuda_skipped + $(gtest_count "$logs/cuda_$program.log" SKIPPED)))
done
memcheck_rc=null
if command -v compute-sanitizer >/dev/null; then
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/test_kernels" \
    --gtest_filter='CudaKernels.Unary*:CudaKernels.Dropout*' >"$logs/memcheck.log" 2>&1
  memcheck_rc=$?
fi
# W1 and W2 on the GPU: one JSON line per run, in a JSON array.
runs=()
for workload in W1 W2 W3; do
  for policy in none blocks cost; do
    line=$(timeout 300 "$bin/remat" bench --workload "$workload" --policy "$policy" --device cuda --steps 5 \
      --warmup 3 --json 2>>"$logs/bench.log" | tail -n 1)
    [[ "$line" == \{* ]] || line="{\"workload\": \"$workload\", \"policy\": \"$policy\", \"failed\": true}"
    runs+=("$line")
  done
done
# W3 keep-all with TF32, then with cuBLASLt's epilogues too (--fused-epilogues),
# to read against PyTorch eager with TF32 below.
for flags in "--tf32" "--tf32 --fused-epilogues"; do
  # shellcheck disable=SC2086
  line=$(timeout 300 "$bin/remat" bench --workload W3 --policy none --device cuda --steps 5 --warmup 3 $flags \
    --json 2>>"$logs/bench.log" | tail -n 1)
  [[ "$line" == \{* ]] || line="{\"workload\": \"W3\", \"policy\": \"none $flags\", \"failed\": true}"
  runs+=("$line")
done
bench_json="[$(IFS=,; echo "${runs[*]}")]"
# PyTorch on the same GPU (eager, checkpoint per block, torch.compile with
# activation_memory_budget 0.5), where the machine's python3 has torch.
torch_runs=()
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  for workload in W2 W3; do
    for mode in eager blocks compile; do
      line=$(timeout 600 python3 bench/gpu/torch_gpu.py --workload "$workload" --mode "$mode" --steps 5 \
        2>>"$logs/torch.log" | tail -n 1)
      [[ "$line" == \{* ]] || line="{\"workload\": \"$workload\", \"policy\": \"$mode\", \"failed\": true}"
      torch_runs+=("$line")
    done
  done
  line=$(timeout 600 python3 bench/gpu/torch_gpu.py --workload W3 --mode eager --steps 5 --tf32 \
    2>>"$logs/torch.log" | tail -n 1)
  [[ "$line" == \{* ]] || line="{\"workload\": \"W3\", \"policy\": \"eager --tf32\", \"failed\": true}"
  torch_runs+=("$line")
fi
torch_json="[$(IFS=,; echo "${torch_runs[*]}")]"


# One rank per GPU runs every NCCL test; two ranks on one GPU must skip alike
# on both ranks (NCCL refuses two ranks on one GPU) rather than hang.
mpirun=(mpirun --allow-run-as-root --oversubscribe)
NCCL_DEBUG=VERSION timeout 120 "${mpirun[@]}" -np "$((gpus > 0 ? gpus : 1))" "$test_comm" \
  --gtest_filter='Nccl*' --gtest_color=no >"$logs/nccl.log" 2>&1
nccl_rc=$?
nccl_version=$(grep -o 'NCCL version [^ ]*' "$logs/nccl.log" | head -n 1)
timeout 120 "${mpirun[@]}" -np $((gpus + 1)) "$test_comm" --gtest_filter='Nccl*' --gtest_color=no \
  >"$logs/nccl_oversubscribed.log" 2>&1
oversubscribed_rc=$?

cp "$logs"/*.log "$out"/
cat >"$out/gpu_check.json" <<JSON
{
  "mode": "$mode",
  "built_from": $(json_string "$built_from"),
  "nvidia_smi": $(json_string "$gpu"),
  "gpus": $gpus,
  "nccl_library": $(json_string "$nccl"),
  "nccl_version": $(json_string "$nccl_version"),
  "missing_libraries": $(json_string "$missing_libraries"),
  "setup_rc": $setup_rc,
  "build_ok": $build_ok,
  "unit_tests_passed": $unit_passed,
  "unit_tests_failed": $unit_failed,
  "nccl_tests_rc": $nccl_rc,
  "nccl_tests_passed": $(gtest_count "$logs/nccl.log" PASSED),
  "nccl_tests_skipped": $(gtest_count "$logs/nccl.log" SKIPPED),
  "nccl_tests_failed": $(gtest_count "$logs/nccl.log" FAILED),
  "oversubscribed_ranks": $((gpus + 1)),
  "oversubscribed_rc": $oversubscribed_rc,
  "oversubscribed_skipped": $(gtest_count "$logs/nccl_oversubscribed.log" SKIPPED),
  "cuda_tests_passed": $cuda_passed,
  "cuda_tests_failed": $cuda_failed,
  "cuda_tests_skipped": $cuda_skipped,
  "memcheck_rc": $memcheck_rc,
  "bench": $bench_json,
  "torch": $torch_json,
  "seconds": $SECONDS
}
JSON
cat "$out/gpu_check.json"
