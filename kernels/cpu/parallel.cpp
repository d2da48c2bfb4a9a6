// set_num_threads: OpenMP and OpenBLAS share one thread count.
#include "kernels/cpu/parallel.h"

#include <omp.h>

#include <stdexcept>
#include <string>

#include "kernels/cpu/blas_symbols.h"

namespace remat::kernels::cpu {

void set_num_threads(int threads) {
  if (threads < 1 || threads > kMaxThreads) {
    throw std::invalid_argument("threads: " + std::to_string(threads) + " is not a thread count from 1 to " +
                                std::to_string(kMaxThreads));
  }
  omp_set_num_threads(threads);
  blas().set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

BlasThreadsGuard::BlasThreadsGuard(int threads) : previous_(blas().get_num_threads()) {
  blas().set_num_threads(threads);
}

BlasThreadsGuard::~BlasThreadsGuard() { blas().set_num_threads(previous_); }

}  // namespace remat::kernels::cpu
