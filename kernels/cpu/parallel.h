// Threads for CPU kernels: one OpenMP thread count for remat's loops and
// for GEMM, whose library (BLIS, gemm_library.h) runs on the same OpenMP
// threads; the size below which a loop stays on one thread (a parallel
// region costs a few microseconds, so small tensors are faster serial); and
// the chunks an elementwise loop is split in, the same at any thread count.
#pragma once

#include <algorithm>
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

// Runs run(begin, end) over [0, n): in one call below 2 * kParallelGrain
// elements, else in chunks of kParallelGrain, which the threads take whole
// (one thread runs them in order). An element sits at the same place of
// the same chunk at any thread count, so the same instructions compute it
// (a vector loop's body or its remainder, which may round differently: an
// `omp for simd` split by the threads gave SGD's float32 momentum other
// bits at 3 threads than at 1).
template <class Run>
void in_chunks(int64_t n, Run&& run) {
  if (n < 2 * kParallelGrain) return run(int64_t{0}, n);
  const int64_t chunks = (n + kParallelGrain - 1) / kParallelGrain;
#pragma omp parallel for schedule(static) if (num_threads() > 1)
  for (int64_t c = 0; c < chunks; ++c) run(c * kParallelGrain, std::min(n, (c + 1) * kParallelGrain));
}

}  // namespace remat::kernels::cpu
