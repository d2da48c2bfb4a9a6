// set_num_threads: OpenMP and OpenBLAS share one thread count.
#include "kernels/cpu/parallel.h"

#include <omp.h>

extern "C" void openblas_set_num_threads(int num_threads);

namespace remat::kernels::cpu {

void set_num_threads(int threads) {
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace remat::kernels::cpu
