// Threads for CPU kernels: one setting for OpenMP loops and OpenBLAS, and the
// size below which a loop stays on one thread (a parallel region costs a few
// microseconds, so small tensors are faster serial).
#pragma once

#include <cstdint>

namespace remat::kernels::cpu {

inline constexpr int64_t kParallelGrain = 32768;  // elements

// Sets the threads used by elementwise loops and by BLAS.
void set_num_threads(int threads);
int num_threads();

// The thread count of set_num_threads() for a scope (tests force 2 so the
// split loops run even where OMP_NUM_THREADS=1); the previous count returns.
class NumThreadsGuard {
 public:
  explicit NumThreadsGuard(int threads) : previous_(num_threads()) { set_num_threads(threads); }
  ~NumThreadsGuard() { set_num_threads(previous_); }
  NumThreadsGuard(const NumThreadsGuard&) = delete;
  NumThreadsGuard& operator=(const NumThreadsGuard&) = delete;

 private:
  int previous_;
};

// BLAS's own thread count for a scope (e.g. 1 while several threads each run
// a small GEMM); the previous count comes back at the end.
class BlasThreadsGuard {
 public:
  explicit BlasThreadsGuard(int threads);
  ~BlasThreadsGuard();
  BlasThreadsGuard(const BlasThreadsGuard&) = delete;
  BlasThreadsGuard& operator=(const BlasThreadsGuard&) = delete;

 private:
  int previous_;
};

}  // namespace remat::kernels::cpu
