// set_num_threads: OpenMP's count, which GEMM takes at each call (gemm.cpp).
#include "kernels/cpu/parallel.h"

#include <omp.h>

#include <stdexcept>
#include <string>

namespace remat::kernels::cpu {

void set_num_threads(int threads) {
  if (threads < 1 || threads > kMaxThreads) {
    throw std::invalid_argument("threads: " + std::to_string(threads) + " is not a thread count from 1 to " +
                                std::to_string(kMaxThreads));
  }
  omp_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace remat::kernels::cpu
