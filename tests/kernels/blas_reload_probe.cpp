// A program of its own for the reload of Note [OpenBLAS core choice]: built
// from kernels/cpu/blas.cpp with REMAT_BLAS_TEST_FIRST_CORETYPE=Prescott, so
// that its first load picks Prescott as a mis-detecting OpenBLAS does, and the
// loader must load it again with the core this CPU's features call for.
// Prints the summary and whether a GEMM through the reloaded library is right
// (CTest: kernels.blas_reload).
#include <cstdio>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/blas_symbols.h"

int main() {
  using namespace remat::kernels::cpu;
  std::printf("%s\n", blas_summary().c_str());
  const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};  // (2, 2) each, row-major
  float c[4] = {};
  blas().sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  const bool right = c[0] == 19 && c[1] == 22 && c[2] == 43 && c[3] == 50;
  std::printf("gemm %s\n", right ? "right" : "wrong");
  return right ? 0 : 1;
}
