// GEMM through OpenBLAS (loaded as kernels/cpu/blas.h says), row-major:
// C (M, N) = alpha * op(A) op(B) + beta * C, where op(A) is (M, K) and op(B)
// is (K, N); lda/ldb/ldc are row strides of the matrices as stored. float
// and double.
#pragma once

#include <cstdint>

namespace remat::kernels::cpu {

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc);

}  // namespace remat::kernels::cpu
