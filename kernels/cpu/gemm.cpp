// gemm: float through oneDNN's dnnl_sgemm (Note [GEMM library] in
// gemm_library.h), double through a plain loop of remat's own; the batched
// form over broadcast strides, and linear's bias rows.
#include "kernels/cpu/gemm.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/parallel.h"
#include "kernels/shapes.h"

namespace remat::kernels::cpu {
namespace {

// C (M, N, row stride ldc) = beta * C: the empty sum, which no library is asked.
template <class T>
void scale_matrix(T* c, int64_t m, int64_t n, int64_t ldc, T beta) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
  }
}

// The double GEMM: op(B) copied to a dense (K, N) panel, then each row of C
// summed over k in ascending order (the same order on any thread count),
// N in chunks that stay in cache. Gradient checks' sizes, not training's.
void gemm_double(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                 int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  std::vector<double> panel(static_cast<size_t>(k * n));  // op(B): (K, N)
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j) panel[static_cast<size_t>(p * n + j)] = trans_b ? b[j * ldb + p] : b[p * ldb + j];
  }
  constexpr int64_t kChunk = 256;
  const bool parallel = m * n * k >= kParallelGrain * 8 && m > 1;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < m; ++i) {
    double sum[kChunk];
    for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
      const int64_t width = std::min(kChunk, n - j0);
      std::fill(sum, sum + width, 0.0);
      for (int64_t p = 0; p < k; ++p) {
        const double a_ip = trans_a ? a[p * lda + i] : a[i * lda + p];  // op(A) (i, p)
        const double* row = panel.data() + p * n + j0;
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) sum[j] += a_ip * row[j];
      }
      double* out = c + i * ldc + j0;
      for (int64_t j = 0; j < width; ++j) out[j] = alpha * sum[j] + (beta == 0.0 ? 0.0 : beta * out[j]);
    }
  }
}

}  // namespace

template <>
void gemm<float>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc, Host) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_matrix(c, m, n, ldc, beta);
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                          beta, c, ldc);
  if (status != dnnl_success) {
    throw std::runtime_error("gemm: oneDNN's sgemm failed (status " + std::to_string(status) + ") for M=" +
                             std::to_string(m) + " N=" + std::to_string(n) + " K=" + std::to_string(k) +
                             ", lda=" + std::to_string(lda) + " ldb=" + std::to_string(ldb) +
                             " ldc=" + std::to_string(ldc) + (trans_a ? ", A transposed" : "") +
                             (trans_b ? ", B transposed" : ""));
  }
}

template <>
void gemm<double>(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                  int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc, Host) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_matrix(c, m, n, ldc, beta);
  gemm_double(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
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
  // Small matrices (attention's per-head products) are too small for a
  // GEMM to use threads well; split the batch over the threads instead,
  // each running single-threaded GEMMs (oneDNN runs on the calling thread
  // alone inside a parallel region).
  const int threads = num_threads();
  if (threads > 1 && count >= threads && m * n * k <= (int64_t{1} << 21)) {
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
