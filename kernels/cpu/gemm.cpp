// gemm: a thin typed front to OpenBLAS's cblas_sgemm / cblas_dgemm, reached
// through the library blas.cpp loaded (Note [OpenBLAS core choice]); the
// batched form over broadcast strides, and linear's bias rows.
#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/blas_symbols.h"
#include "kernels/cpu/parallel.h"
#include "kernels/shapes.h"

namespace remat::kernels::cpu {
namespace {

// C (M, N, row stride ldc) = beta * C: the empty sum, which BLAS is not asked.
template <class T>
void scale_matrix(T* c, int64_t m, int64_t n, int64_t ldc, T beta) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta * c[i * ldc + j];
  }
}

}  // namespace

template <>
void gemm<float>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc, Host) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_matrix(c, m, n, ldc, beta);
  blas().sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
               a, lda, b, ldb, beta, c, ldc);
}

template <>
void gemm<double>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                  int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc, Host) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_matrix(c, m, n, ldc, beta);
  blas().dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
               a, lda, b, ldb, beta, c, ldc);
}

template <class T>
void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                  const std::vector<int64_t>& a_strides, int64_t lda, const T* b, const std::vector<int64_t>& b_strides,
                  int64_t ldb, T* c, const std::vector<int64_t>& batch, Host) {
  int64_t count = 1;
  for (int64_t size : batch) count *= size;
  if (count == 0 || m == 0 || n == 0) return;
  if (k == 0) return std::fill(c, c + count * m * n, T(0));
  const BatchOffsets offsets = batch_offsets(batch, a_strides, b_strides);
  auto one = [&](int64_t i) {
    gemm<T>(trans_a, trans_b, m, n, k, alpha, a + offsets.a[static_cast<size_t>(i)], lda,
            b + offsets.b[static_cast<size_t>(i)], ldb, T(0), c + i * m * n, n);
  };
  // Small matrices (attention's per-head products) are too small for BLAS
  // to use threads well; split the batch over the threads instead, each
  // running single-threaded GEMMs.
  const int threads = num_threads();
  if (threads > 1 && count >= threads && m * n * k <= (int64_t{1} << 21)) {
    BlasThreadsGuard single(1);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) one(i);
  } else {
    for (int64_t i = 0; i < count; ++i) one(i);
  }
}

template <class T>
void repeat_rows(T* out, const T* row, int64_t rows, int64_t n, Host) {
  for (int64_t r = 0; r < rows; ++r) std::memcpy(out + r * n, row, n * sizeof(T));
}

template <class T>
void sum_rows(T* out, const T* x, int64_t rows, int64_t n, Host) {
  std::fill(out, out + n, T(0));
  for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) out[j] += x[r * n + j];
  }
}

#define REMAT_INSTANTIATE_GEMM(T)                                                                                  \
  template void gemm_batched<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, const std::vector<int64_t>&,   \
                                int64_t, const T*, const std::vector<int64_t>&, int64_t, T*,                       \
                                const std::vector<int64_t>&, Host);                                                \
  template void repeat_rows<T>(T*, const T*, int64_t, int64_t, Host);                                              \
  template void sum_rows<T>(T*, const T*, int64_t, int64_t, Host);
REMAT_INSTANTIATE_GEMM(float)
REMAT_INSTANTIATE_GEMM(double)
#undef REMAT_INSTANTIATE_GEMM

}  // namespace remat::kernels::cpu
