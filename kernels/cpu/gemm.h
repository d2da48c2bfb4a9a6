// GEMM, row-major: C (M, N) = alpha * op(A) op(B) + beta * C, where op(A) is
// (M, K) and op(B) is (K, N); lda/ldb/ldc are row strides of the matrices as
// stored; float through BLIS or oneDNN, as chosen for the CPU, double
// through BLIS (Note [GEMM library] in gemm_library.h); the bits of C do not
// depend on the thread count. With K = 0 the sum is empty: C = beta * C;
// with beta = 0, C is written, never read. Called inside an OpenMP parallel
// region, it runs on the calling thread alone. A REMAT_GEMM that names no
// library throws std::invalid_argument.
// Also the batched form matmul uses, and linear's bias rows.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc, Host = {});

// C_i (M, N) = alpha * op(A_i) op(B_i) for every index i of `batch` (row-major
// order), A_i at a + sum_d i_d a_strides[d] (elements; 0 on an axis A is
// broadcast along), B_i likewise, C_i at c + i M N (dense, ldc = N).
template <class T>
void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                  const std::vector<int64_t>& a_strides, int64_t lda, const T* b, const std::vector<int64_t>& b_strides,
                  int64_t ldb, T* c, const std::vector<int64_t>& batch, Host = {});

// out (rows, n) = row (n) in every row: a bias, before a GEMM adds into it.
template <class T>
void repeat_rows(T* out, const T* row, int64_t rows, int64_t n, Host = {});
// out (n) = the sum over rows of x (rows, n): a bias's gradient.
template <class T>
void sum_rows(T* out, const T* x, int64_t rows, int64_t n, Host = {});

}  // namespace remat::kernels::cpu
