// Threads for CPU kernels: one OpenMP thread count for remat's loops and
// for GEMM, whose library (BLIS, gemm_library.h) runs on the same OpenMP
// threads; and the size below which a loop stays on one thread (a parallel
// region costs a few microseconds, so small tensors are faster serial).
#pragma once

#include <cstdint>

namespace remat::kernels::cpu {

inline constexpr int64_t kParallelGrain = 32768;  // elements

// The most threads a process may ask for. libgomp crashes or fails to create
// threads far above it (100000 segfaulted inside libgomp), and no machine
// this runs on has more than a few hundred cores.
inline constexpr int kMaxThreads = 1024;

// Sets the threads used by elementwise loops and by GEMM; outside
// 1..kMaxThreads it throws std::invalid_argument naming the count.
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

}  // namespace remat::kernels::cpu
