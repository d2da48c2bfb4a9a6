// set_num_threads: OpenMP and OpenBLAS share one thread count.
#include "kernels/cpu/parallel.h"

#include <omp.h>

extern "C" void openblas_set_num_threads(int num_threads);
extern "C" int openblas_get_num_threads();

namespace remat::kernels::cpu {

void set_num_threads(int threads) {
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

BlasThreadsGuard::BlasThreadsGuard(int threads) : previous_(openblas_get_num_threads()) {
  openblas_set_num_threads(threads);
}

BlasThreadsGuard::~BlasThreadsGuard() { openblas_set_num_threads(previous_); }

}  // namespace remat::kernels::cpu
