// GEMM on the GPU through cuBLAS; see gemm.h. cuBLAS is column-major: a
// row-major (M, N) matrix with row stride ld is its (N, M) transpose there,
// so C^T = op(B)^T op(A)^T is asked for, B first. Batches go as few
// strided-batched calls as their strides allow. gemm_bias and
// gemm_bias_grad go to cuBLASLt with the same mapping (Note [Fused
// epilogues] in gemm.h).
#include "kernels/cuda/gemm.h"

#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <type_traits>
#include <utility>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/unary.h"
#include "kernels/unary_math.h"
#include "kernels/shapes.h"

namespace remat::kernels::cuda {
namespace {

std::atomic<bool> g_allow_tf32{false};
std::atomic<bool> g_fused_epilogues{false};

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

// --- cuBLASLt (Note [Fused epilogues]) ----------------------------------

// cuBLASLt's workspace, per device: what its heuristic may use for split-K
// and the bias-gradient reductions (4 MiB, as cuBLAS keeps per handle).
constexpr size_t kLtWorkspaceBytes = size_t{4} << 20;

struct LtDevice {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

// One handle and workspace per device, made on first use, kept for the
// process. Every call is queued on the device's compute stream, so calls
// sharing the workspace never overlap.
LtDevice lt_device_for(Stream stream) {
  static std::mutex mutex;
  static auto& devices = *new std::vector<LtDevice>;  // kept for the process, as the handles
  std::lock_guard lock(mutex);
  if (devices.size() <= static_cast<size_t>(stream.device)) devices.resize(static_cast<size_t>(stream.device) + 1);
  LtDevice& lt = devices[static_cast<size_t>(stream.device)];
  REMAT_CUDA_CHECK(cudaSetDevice(stream.device));
  if (!lt.handle) {
    REMAT_CUDA_CHECK(cudaMalloc(&lt.workspace, kLtWorkspaceBytes));
    REMAT_CUBLAS_CHECK(cublasLtCreate(&lt.handle));
  }
  return lt;
}

// The descriptors of one call, destroyed however it ends.
struct LtCall {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  LtCall() = default;
  LtCall(const LtCall&) = delete;
  LtCall& operator=(const LtCall&) = delete;
  ~LtCall() {
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

template <class T>
void set_attribute(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  REMAT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, attribute, &value, sizeof(value)));
}

// Column-major D (m x n, ld ldd) = op(A) op(B) with `epilogue`, its
// vector `bias` (read, or written for a gradient) and its aux matrix (m x n,
// ld aux_ld; GELU's input), in cuBLAS's own terms (A and B already swapped
// for row-major). False, with nothing queued, where cuBLASLt's heuristic
// offers no algorithm for the problem.
template <class T>
bool lt_matmul(Stream stream, cublasOperation_t oa, cublasOperation_t ob, int64_t m, int64_t n, int64_t k, const T* a,
               int64_t lda, const T* b, int64_t ldb, T* d, int64_t ldd, cublasLtEpilogue_t epilogue, const void* bias,
               void* aux = nullptr, int64_t aux_ld = 0) {
  const LtDevice lt = lt_device_for(stream);
  constexpr cudaDataType_t type = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_64F;
  const cublasComputeType_t compute = !std::is_same_v<T, float> ? CUBLAS_COMPUTE_64F
                                      : allow_tf32()            ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                : CUBLAS_COMPUTE_32F;
  LtCall call;
  REMAT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&call.op, compute, type));
  set_attribute(call.op, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(oa));
  set_attribute(call.op, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(ob));
  set_attribute(call.op, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(epilogue));
  set_attribute(call.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (aux) {
    set_attribute(call.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    set_attribute(call.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld);
  }
  const auto rows = [](cublasOperation_t o, int64_t r, int64_t c) { return static_cast<uint64_t>(o == CUBLAS_OP_N ? r : c); };
  REMAT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.a, type, rows(oa, m, k), rows(oa, k, m), lda));
  REMAT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.b, type, rows(ob, k, n), rows(ob, n, k), ldb));
  REMAT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.d, type, static_cast<uint64_t>(m), static_cast<uint64_t>(n), ldd));
  REMAT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&call.preference));
  const uint64_t workspace = kLtWorkspaceBytes;
  REMAT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(call.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &workspace, sizeof(workspace)));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt.handle, call.op, call.a, call.b, call.d, call.d,
                                                               call.preference, 1, &heuristic, &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) return false;
  REMAT_CUBLAS_CHECK(status);
  const T one = T(1), zero = T(0);
  REMAT_CUBLAS_CHECK(cublasLtMatmul(lt.handle, call.op, &one, a, call.a, b, call.b, &zero, d, call.d, d, call.d,
                                    &heuristic.algo, lt.workspace, kLtWorkspaceBytes, raw(stream)));
  return true;
}

}  // namespace

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }
void set_fused_epilogues(bool on) { g_fused_epilogues.store(on); }
bool fused_epilogues() { return g_fused_epilogues.load(); }

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
void gemm_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
               int64_t ldb, const T* bias, T* c, int64_t ldc, Stream stream) {
  if (m == 0 || n == 0) return;
  // C^T (N x M) = op(B)^T op(A)^T + bias: the bias has D's row count, N.
  if (k == 0 || !lt_matmul(stream, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                           b, ldb, a, lda, c, ldc, CUBLASLT_EPILOGUE_BIAS, bias)) {
    launch_elementwise(m * n, stream, [=] __device__(int64_t e) { c[(e / n) * ldc + e % n] = bias[e % n]; });
    gemm(trans_a, trans_b, m, n, k, T(1), a, lda, b, ldb, T(1), c, ldc, stream);
  }
}

template <class T>
void gemm_bias_gelu(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
                    int64_t ldb, const T* bias, T* c, T* pre, Stream stream) {
  if (m == 0 || n == 0) return;
  // C^T and pre^T (N x M, ld N): cuBLASLt wants the aux ld a multiple of 8.
  if (k > 0 && n % 8 == 0 &&
      lt_matmul(stream, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, b, ldb, a,
                lda, c, n, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias, static_cast<void*>(pre), n)) {
    return;
  }
  gemm_bias(trans_a, trans_b, m, n, k, a, lda, b, ldb, bias, pre, n, stream);
  unary_forward<Gelu>(c, pre, m * n, stream);
}

template <class T>
void gemm_bias_grad(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
                    int64_t ldb, T* c, int64_t ldc, T* dbias, BiasGradOf of, Stream stream) {
  if (m == 0 || n == 0) return;
  // cuBLASLt's A is our B: our op(A)'s sums are its BGRADB, op(B)'s its BGRADA.
  const cublasLtEpilogue_t epilogue = of == BiasGradOf::A ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_BGRADA;
  if (k > 0 && lt_matmul(stream, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, b,
                         ldb, a, lda, c, ldc, epilogue, static_cast<const void*>(dbias))) {
    return;
  }
  gemm(trans_a, trans_b, m, n, k, T(1), a, lda, b, ldb, T(0), c, ldc, stream);
  // dbias[i] = sum over K of op(X)[i, kk], kk in order; op(A) is (M, K), op(B)^T (N, K).
  const bool of_a = of == BiasGradOf::A;
  const T* x = of_a ? a : b;
  const int64_t ld = of_a ? lda : ldb, count = of_a ? m : n;
  const bool by_rows = of_a ? !trans_a : trans_b;  // element (i, kk) at x[i ld + kk], else x[kk ld + i]
  if (!by_rows) {  // a column sum of the (K, count) matrix: reduce.cuh's, in chunks
    sum_to<T>(dbias, count, x, {ld, 1}, {0, 1}, {k, count}, stream);
    return;
  }
  launch_elementwise(count, stream, [=] __device__(int64_t i) {
    T acc = T(0);
    for (int64_t kk = 0; kk < k; ++kk) acc += x[i * ld + kk];  // a row of X, in order
    dbias[i] = acc;
  });
}

template <class T>
void repeat_rows(T* out, const T* row, int64_t rows, int64_t n, Stream stream) {
  launch_elementwise(rows * n, stream, [=] __device__(int64_t e) { out[e] = row[e % n]; });
}

template <class T>
void sum_rows(T* out, const T* x, int64_t rows, int64_t n, Stream stream) {
  // The column sums of reduce.cuh: tiles of columns, and rows cut into
  // chunks added in order when the columns are few (a bias of 768 over 8192
  // rows: 1,056 blocks, not 3 of a thread a column). Note [Column sums in chunks].
  sum_to<T>(out, n, x, {n, 1}, {0, 1}, {rows, n}, stream);
}

#define REMAT_INSTANTIATE_GEMM(T)                                                                                 \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, int64_t, T, T*,  \
                        int64_t, Stream);                                                                         \
  template void gemm_batched<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, const std::vector<int64_t>&, \
                                int64_t, const T*, const std::vector<int64_t>&, int64_t, T*,                     \
                                const std::vector<int64_t>&, Stream);                                            \
  template void gemm_bias<T>(bool, bool, int64_t, int64_t, int64_t, const T*, int64_t, const T*, int64_t, const T*, \
                             T*, int64_t, Stream);                                                               \
  template void gemm_bias_gelu<T>(bool, bool, int64_t, int64_t, int64_t, const T*, int64_t, const T*, int64_t,   \
                                  const T*, T*, T*, Stream);                                                     \
  template void gemm_bias_grad<T>(bool, bool, int64_t, int64_t, int64_t, const T*, int64_t, const T*, int64_t, T*,   \
                                  int64_t, T*, BiasGradOf, Stream);                                              \
  template void repeat_rows<T>(T*, const T*, int64_t, int64_t, Stream);                                          \
  template void sum_rows<T>(T*, const T*, int64_t, int64_t, Stream);
REMAT_INSTANTIATE_GEMM(float)
REMAT_INSTANTIATE_GEMM(double)
#undef REMAT_INSTANTIATE_GEMM

}  // namespace remat::kernels::cuda
