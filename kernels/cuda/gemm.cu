// GEMM on the GPU through cuBLAS; see gemm.h. cuBLAS is column-major: a
// row-major (M, N) matrix with row stride ld is its (N, M) transpose there,
// so C^T = op(B)^T op(A)^T is asked for, B first. Batches go as few
// strided-batched calls as their strides allow.
#include "kernels/cuda/gemm.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <utility>

#include "kernels/cuda/launch.cuh"
#include "kernels/shapes.h"

namespace remat::kernels::cuda {
namespace {

std::atomic<bool> g_allow_tf32{false};

// One handle per device, made on first use, kept for the process; its math
// mode set at every use, so that set_allow_tf32 reaches handles made before.
cublasHandle_t handle_for(Stream stream) {
  static std::mutex mutex;
  static auto& handles = *new std::vector<cublasHandle_t>;  // kept for the process, as the handles
  std::lock_guard lock(mutex);
  if (handles.size() <= static_cast<size_t>(stream.device)) handles.resize(static_cast<size_t>(stream.device) + 1);
  cublasHandle_t& handle = handles[static_cast<size_t>(stream.device)];
  if (!handle) {
    REMAT_CUDA_CHECK(cudaSetDevice(stream.device));
    REMAT_CUBLAS_CHECK(cublasCreate(&handle));
  }
  REMAT_CUDA_CHECK(cudaSetDevice(stream.device));  // a handle is used with its own device current
  REMAT_CUBLAS_CHECK(cublasSetStream(handle, raw(stream)));
  // A host-side setting of the handle (no device work): cheap at every call.
  REMAT_CUBLAS_CHECK(cublasSetMathMode(handle, allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  return handle;
}

int as_int(int64_t v) { return static_cast<int>(v); }  // the op checked the 32-bit limits

void gemm_call(cublasHandle_t h, cublasOperation_t ob, cublasOperation_t oa, int64_t m, int64_t n, int64_t k,
               const float* alpha, const float* b, int64_t ldb, const float* a, int64_t lda, const float* beta,
               float* c, int64_t ldc) {
  REMAT_CUBLAS_CHECK(cublasSgemm(h, ob, oa, as_int(n), as_int(m), as_int(k), alpha, b, as_int(ldb), a, as_int(lda),
                                 beta, c, as_int(ldc)));
}
void gemm_call(cublasHandle_t h, cublasOperation_t ob, cublasOperation_t oa, int64_t m, int64_t n, int64_t k,
               const double* alpha, const double* b, int64_t ldb, const double* a, int64_t lda, const double* beta,
               double* c, int64_t ldc) {
  REMAT_CUBLAS_CHECK(cublasDgemm(h, ob, oa, as_int(n), as_int(m), as_int(k), alpha, b, as_int(ldb), a, as_int(lda),
                                 beta, c, as_int(ldc)));
}

void gemm_strided_call(cublasHandle_t h, cublasOperation_t ob, cublasOperation_t oa, int64_t m, int64_t n, int64_t k,
                       const float* alpha, const float* b, int64_t ldb, int64_t stride_b, const float* a, int64_t lda,
                       int64_t stride_a, float* c, int64_t ldc, int64_t stride_c, int64_t count) {
  const float beta = 0;
  REMAT_CUBLAS_CHECK(cublasSgemmStridedBatched(h, ob, oa, as_int(n), as_int(m), as_int(k), alpha, b, as_int(ldb),
                                               stride_b, a, as_int(lda), stride_a, &beta, c, as_int(ldc), stride_c,
                                               as_int(count)));
}
void gemm_strided_call(cublasHandle_t h, cublasOperation_t ob, cublasOperation_t oa, int64_t m, int64_t n, int64_t k,
                       const double* alpha, const double* b, int64_t ldb, int64_t stride_b, const double* a,
                       int64_t lda, int64_t stride_a, double* c, int64_t ldc, int64_t stride_c, int64_t count) {
  const double beta = 0;
  REMAT_CUBLAS_CHECK(cublasDgemmStridedBatched(h, ob, oa, as_int(n), as_int(m), as_int(k), alpha, b, as_int(ldb),
                                               stride_b, a, as_int(lda), stride_a, &beta, c, as_int(ldc), stride_c,
                                               as_int(count)));
}

}  // namespace

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc, Stream stream) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // the empty sum: C = beta C, as on the CPU (scale_matrix)
    // With beta == 0, C is written, never read, as cuBLAS promises: it may
    // be recycled pool memory holding NaN, and 0 * NaN is NaN.
    launch_elementwise(m * n, stream, [=] __device__(int64_t e) {
      const int64_t i = e / n, j = e % n;
      c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    });
    return;
  }
  gemm_call(handle_for(stream), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
            &alpha, b, ldb, a, lda, &beta, c, ldc);
}

template <class T>
void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                  const std::vector<int64_t>& a_strides, int64_t lda, const T* b, const std::vector<int64_t>& b_strides,
                  int64_t ldb, T* c, const std::vector<int64_t>& batch, Stream stream) {
  const int64_t count = numel_of(batch);
  if (count == 0 || m == 0 || n == 0) return;
  if (k == 0) {
    launch_elementwise(count * m * n, stream, [=] __device__(int64_t e) { c[e] = T(0); });
    return;
  }
  // One strided-batched cuBLAS call per run of matrices whose A and B
  // offsets step by constant strides: attention's (batch, heads) products,
  // contiguous or broadcast, are one call (they were one call per matrix,
  // 6,912 a W3 step).
  const BatchOffsets offsets = batch_offsets(batch, a_strides, b_strides);
  cublasHandle_t handle = handle_for(stream);
  const cublasOperation_t ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  for (int64_t first = 0; first < count;) {
    const auto at = [&](int64_t i) { return std::pair{offsets.a[static_cast<size_t>(i)], offsets.b[static_cast<size_t>(i)]}; };
    int64_t stride_a = 0, stride_b = 0, last = first;
    if (first + 1 < count) {
      stride_a = at(first + 1).first - at(first).first;
      stride_b = at(first + 1).second - at(first).second;
      last = first + 1;
      while (last + 1 < count && at(last + 1).first - at(last).first == stride_a &&
             at(last + 1).second - at(last).second == stride_b) {
        ++last;
      }
    }
    const int64_t run = last - first + 1;
    for (int64_t done = 0; done < run;) {  // cuBLAS counts the batch in an int
      const int64_t part = std::min<int64_t>(run - done, std::numeric_limits<int>::max());
      const int64_t i = first + done;
      gemm_strided_call(handle, ob, oa, m, n, k, &alpha, b + at(i).second, ldb, stride_b, a + at(i).first, lda, stride_a,
                        c + i * m * n, n, m * n, part);
      done += part;
    }
    first = last + 1;
  }
}

template <class T>
void repeat_rows(T* out, const T* row, int64_t rows, int64_t n, Stream stream) {
  launch_elementwise(rows * n, stream, [=] __device__(int64_t e) { out[e] = row[e % n]; });
}

template <class T>
void sum_rows(T* out, const T* x, int64_t rows, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t j) {
    T acc = T(0);
    for (int64_t r = 0; r < rows; ++r) acc += x[r * n + j];  // rows in order, as on the CPU
    out[j] = acc;
  });
}

#define REMAT_INSTANTIATE_GEMM(T)                                                                                 \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, int64_t, T, T*,  \
                        int64_t, Stream);                                                                         \
  template void gemm_batched<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, const std::vector<int64_t>&, \
                                int64_t, const T*, const std::vector<int64_t>&, int64_t, T*,                     \
                                const std::vector<int64_t>&, Stream);                                            \
  template void repeat_rows<T>(T*, const T*, int64_t, int64_t, Stream);                                          \
  template void sum_rows<T>(T*, const T*, int64_t, int64_t, Stream);
REMAT_INSTANTIATE_GEMM(float)
REMAT_INSTANTIATE_GEMM(double)
#undef REMAT_INSTANTIATE_GEMM

}  // namespace remat::kernels::cuda
