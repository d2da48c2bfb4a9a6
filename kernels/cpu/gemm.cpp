// gemm: a thin typed front to OpenBLAS's cblas_sgemm / cblas_dgemm, reached
// through the library blas.cpp loaded (Note [OpenBLAS core choice]).
#include "kernels/cpu/gemm.h"

#include "kernels/cpu/blas_symbols.h"

namespace remat::kernels::cpu {

template <>
void gemm<float>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  blas().sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
               a, lda, b, ldb, beta, c, ldc);
}

template <>
void gemm<double>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                  int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  blas().dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
               a, lda, b, ldb, beta, c, ldc);
}

}  // namespace remat::kernels::cpu
