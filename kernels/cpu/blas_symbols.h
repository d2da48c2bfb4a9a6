// The OpenBLAS entry points that gemm.cpp and parallel.cpp call, resolved
// from the library blas.cpp loaded (Note [OpenBLAS core choice] in blas.h).
// Private to kernels/cpu: the rest of remat calls gemm() and set_num_threads().
#pragma once

#include <cblas.h>

namespace remat::kernels::cpu {

struct BlasSymbols {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_dgemm) dgemm = nullptr;
  void (*set_num_threads)(int) = nullptr;
  int (*get_num_threads)() = nullptr;
  char* (*get_corename)() = nullptr;
  char* (*get_config)() = nullptr;
};

// Loads the library on first use (thread-safe), then returns the same table.
const BlasSymbols& blas();

}  // namespace remat::kernels::cpu
