#!/usr/bin/env bash
# The unit tests and the CUDA code under AddressSanitizer +
# UndefinedBehaviorSanitizer. clang 14 builds the libraries and the test
# programs into build-sanitize/ (-O1, line tables; REMAT_FUZZ on, so
# scripts/fuzz.sh links its fuzzers against the same sanitized libraries;
# REMAT_CUDA_EMULATION on, so the .cu files run on the emulated GPU of
# docs/gpu/emulation.md), then CTest runs label unit and label cuda (every
# CUDA kernel, op, tensor, profiler and NCCL test, and W1 and W2 under every
# policy on the emulated GPU; a test that skips fails). A finding ends its
# program (-fno-sanitize-recover, abort_on_error), so its test fails.
#   scripts/sanitize.sh            configure, build, run
#   scripts/sanitize.sh configure  only configure build-sanitize/ (for scripts/fuzz.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/sanitize_env.sh

# -Wno-pass-failed: at -O1 clang cannot honour every `#pragma omp simd` and
# says so for each; the Release build (GCC, -O3) is where vectorising matters.
cmake -S . -B build-sanitize -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -Wno-pass-failed" \
  -DREMAT_NATIVE=OFF -DREMAT_BUILD_BENCH=OFF -DREMAT_CUDA=OFF -DREMAT_CUDA_EMULATION=ON -DREMAT_BUILD_PYTHON=OFF \
  -DREMAT_SANITIZE=address,undefined -DREMAT_FUZZ=ON
[[ "${1:-}" == configure ]] && exit 0

# Only the programs of labels unit and cuda: bench, the torch parity dump
# and the stuck-rank helper of label mpi are not built.
programs=(test_kernels test_engine test_ops test_scheduler test_nn test_optim test_train test_comm test_tools remat
          probe_vector_init example_trainer example_accelerator example_local_sgd example_tour)
cmake --build build-sanitize -j "$(nproc)" --target "${programs[@]}"

# Every test of labels unit and cuda runs (label cuda: the CUDA code on the
# emulated GPU, as the Release build has nvcc's code and no GPU), in one
# CTest run so that the long emulated trainings share the cores with the
# short tests. Label slow is left out: its training runs and W2 workloads
# take minutes at Release speed, several times that here, and the code they
# run is the code the unit tests run. Labels mpi and torch need other
# programs (several MPI ranks, PyTorch) and run in the Release build only.
junit=$PWD/build-sanitize/ctest-junit.xml
ctest --test-dir build-sanitize -L 'unit|cuda' -j "$(nproc)" --output-on-failure --output-junit "$junit"
echo "under ASan + UBSan, the CUDA code on the emulated GPU:"
scripts/test_summary.py build-sanitize "$junit" --only unit --only cuda
