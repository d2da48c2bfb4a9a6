// cuBLAS on the emulated GPU; see cublas_v2.h. Arguments are checked as
// cuBLAS checks them (CUBLAS_STATUS_INVALID_VALUE at the call); each
// operand's extent, from its leading dimension, must lie inside one device
// allocation (a GPU would fault, or read a neighbour's bytes). The product
// is column-major C = alpha op(A) op(B) + beta C, computed by BLIS told the
// column-major strides (row stride 1, column stride ld), so remat's
// row-major-to-column-major mapping in kernels/cuda/gemm.cu is what is
// tested. With beta = 0, C is written and never read, and with k = 0 or
// alpha = 0, C = beta C, as cuBLAS promises. Under CUBLAS_TF32_TENSOR_OP_MATH
// a float GEMM reads A and B rounded to TF32 (10 mantissa bits, to nearest,
// ties away from zero, as cvt.rna.tf32.f32) and sums in float32, as the
// tensor cores do (not in their order: within float32 rounding of a GPU).
// The GEMM itself, reference_gemm (reference_gemm.h), serves the emulated
// cuBLASLt too (cublaslt.cpp).
#include <cublas_v2.h>

#include <blis.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/gemm_blis.h"
#include "kernels/cuda/emulation/emulator.h"
#include "kernels/cuda/emulation/reference_gemm.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace remat_emulation {

size_t span_bytes(int64_t rows, int64_t cols, int64_t ld, size_t element) {
  if (rows == 0 || cols == 0) return 0;
  return static_cast<size_t>((cols - 1) * ld + rows) * element;
}

namespace {

// x rounded to TF32: 10 of float32's 23 mantissa bits kept, to nearest,
// ties away from zero; infinities and NaN unchanged.
float tf32_of(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) != 0x7f800000u) bits = (bits + 0x1000u) & 0xffffe000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

// The `count` elements from p, rounded to TF32.
std::vector<float> tf32_copy(const float* p, int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[static_cast<size_t>(i)] = tf32_of(p[i]);
  return out;
}

template <class T>
void gemm_on_host(cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, T alpha, const T* a, int lda,
                  const T* b, int ldb, T beta, T* c, int ldc) {
  if (k == 0 || alpha == T(0)) {
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        T& v = c[static_cast<int64_t>(j) * ldc + i];
        v = beta == T(0) ? T(0) : beta * v;
      }
    }
    return;
  }
  remat::kernels::cpu::ensure_blis_started();
  rntm_t rntm;
  bli_rntm_init_from_global(&rntm);
  bli_rntm_set_num_threads(1, &rntm);
  const trans_t ta = transa == CUBLAS_OP_N ? BLIS_NO_TRANSPOSE : BLIS_TRANSPOSE;
  const trans_t tb = transb == CUBLAS_OP_N ? BLIS_NO_TRANSPOSE : BLIS_TRANSPOSE;
  if constexpr (std::is_same_v<T, float>) {
    bli_sgemm_ex(ta, tb, m, n, k, &alpha, const_cast<T*>(a), 1, lda, const_cast<T*>(b), 1, ldb, &beta, c, 1, ldc,
                 nullptr, &rntm);
  } else {
    bli_dgemm_ex(ta, tb, m, n, k, &alpha, const_cast<T*>(a), 1, lda, const_cast<T*>(b), 1, ldb, &beta, c, 1, ldc,
                 nullptr, &rntm);
  }
}

}  // namespace

template <class T>
void reference_gemm(cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, T alpha, const T* a,
                    int lda, const T* b, int ldb, T beta, T* c, int ldc, bool tf32) {
  const bool na = transa == CUBLAS_OP_N, nb = transb == CUBLAS_OP_N;
  if constexpr (std::is_same_v<T, float>) {
    if (tf32 && k > 0 && alpha != T(0)) {
      const std::vector<float> a32 = tf32_copy(a, static_cast<int64_t>(span_bytes(na ? m : k, na ? k : m, lda, 1)));
      const std::vector<float> b32 = tf32_copy(b, static_cast<int64_t>(span_bytes(nb ? k : n, nb ? n : k, ldb, 1)));
      gemm_on_host(transa, transb, m, n, k, alpha, a32.data(), lda, b32.data(), ldb, beta, c, ldc);
      return;
    }
  }
  gemm_on_host(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
template void reference_gemm<float>(cublasOperation_t, cublasOperation_t, int, int, int, float, const float*, int,
                                    const float*, int, float, float*, int, bool);
template void reference_gemm<double>(cublasOperation_t, cublasOperation_t, int, int, int, double, const double*, int,
                                     const double*, int, double, double*, int, bool);

namespace {

template <class T>
cublasStatus_t gemm_strided(const char* name, cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const T* alpha, const T* a, int lda,
                            long long stride_a, const T* b, int ldb, long long stride_b, const T* beta, T* c, int ldc,
                            long long stride_c, int batch) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool na = transa == CUBLAS_OP_N, nb = transb == CUBLAS_OP_N;
  const int a_rows = na ? m : k, a_cols = na ? k : m, b_rows = nb ? k : n, b_cols = nb ? n : k;
  const bool valid_op = (transa == CUBLAS_OP_N || transa == CUBLAS_OP_T || transa == CUBLAS_OP_C) &&
                        (transb == CUBLAS_OP_N || transb == CUBLAS_OP_T || transb == CUBLAS_OP_C);
  if (!valid_op || m < 0 || n < 0 || k < 0 || batch < 0 || lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) ||
      ldc < std::max(1, m)) {
    set_error(cudaErrorInvalidValue,
              std::string(name) + ": m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k) +
                  ", lda " + std::to_string(lda) + ", ldb " + std::to_string(ldb) + ", ldc " + std::to_string(ldc) +
                  ": cuBLAS needs lda >= max(1, " + std::to_string(a_rows) + "), ldb >= max(1, " +
                  std::to_string(b_rows) + "), ldc >= max(1, " + std::to_string(m) + ")");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
  const T alpha_value = *alpha, beta_value = *beta;  // host pointer mode: read at the call
  const bool reads_ab = k > 0 && alpha_value != T(0);
  const bool tf32 = std::is_same_v<T, float> && handle->math == CUBLAS_TF32_TENSOR_OP_MATH;
  Task task;
  task.what = std::string(name) + " (m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k) +
              (batch > 1 ? ", batch " + std::to_string(batch) : "") + ")";
  task.code = cudaErrorIllegalAddress;
  task.run = [=]() -> std::string {
    for (int i = 0; i < batch; ++i) {
      const T* ai = a + i * stride_a;
      const T* bi = b + i * stride_b;
      T* ci = c + i * stride_c;
      std::string e;
      if (reads_ab) e = check_device_range(ai, span_bytes(a_rows, a_cols, lda, sizeof(T)), "A");
      if (e.empty() && reads_ab) e = check_device_range(bi, span_bytes(b_rows, b_cols, ldb, sizeof(T)), "B");
      if (e.empty()) e = check_device_range(ci, span_bytes(m, n, ldc, sizeof(T)), "C");
      if (!e.empty()) return "matrix " + std::to_string(i) + ": " + e;
      reference_gemm(transa, transb, m, n, k, alpha_value, ai, lda, bi, ldb, beta_value, ci, ldc, tf32);
    }
    return std::string();
  };
  return enqueue(handle->stream, std::move(task)) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                                                  : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // namespace
}  // namespace remat_emulation

using namespace remat_emulation;

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math = mode;  // TF32: float GEMMs read A and B rounded (gemm_strided)
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  *mode = handle->math;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value) {
  switch (type) {
    case MAJOR_VERSION: *value = 13; break;
    case MINOR_VERSION: *value = 0; break;
    case PATCH_LEVEL: *value = 0; break;
  }
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  // The argument check's own words, when it said any (cudaGetErrorString).
  if (status == CUBLAS_STATUS_INVALID_VALUE) return cudaGetErrorString(cudaErrorInvalidValue);
  return status == CUBLAS_STATUS_SUCCESS ? "success" : "the emulated cuBLAS failed";
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float* alpha, const float* a, int lda, const float* b, int ldb,
                           const float* beta, float* c, int ldc) {
  return gemm_strided("cublasSgemm", handle, transa, transb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const double* alpha, const double* a, int lda, const double* b, int ldb,
                           const double* beta, double* c, int ldc) {
  return gemm_strided("cublasDgemm", handle, transa, transb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const float* alpha, const float* a, int lda,
                                         long long stride_a, const float* b, int ldb, long long stride_b,
                                         const float* beta, float* c, int ldc, long long stride_c, int batch_count) {
  return gemm_strided("cublasSgemmStridedBatched", handle, transa, transb, m, n, k, alpha, a, lda, stride_a, b, ldb,
                      stride_b, beta, c, ldc, stride_c, batch_count);
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const double* alpha, const double* a, int lda,
                                         long long stride_a, const double* b, int ldb, long long stride_b,
                                         const double* beta, double* c, int ldc, long long stride_c, int batch_count) {
  return gemm_strided("cublasDgemmStridedBatched", handle, transa, transb, m, n, k, alpha, a, lda, stride_a, b, ldb,
                      stride_b, beta, c, ldc, stride_c, batch_count);
}
