// cuBLASLt on the emulated GPU; see include/cublasLt.h. cublasLtMatmul
// checks its descriptors as cuBLASLt does (CUBLAS_STATUS_INVALID_VALUE for
// a wrong argument, CUBLAS_STATUS_NOT_SUPPORTED for a combination it has no
// kernel for, the reason in cudaGetErrorString's words) and queues on the
// stream: the reference GEMM of cublas.cpp into D, then the epilogue, in
// the order the toolkit's cublasLt.h documents:
//   1. BGRADA / BGRADB: bias[i] = sum over k of op(A)[i, k], or
//      bias[j] = sum over k of op(B)[k, j] (from the inputs, k in order);
//   2. BIAS: D[i, j] += bias[i] (the vector has D's row count);
//   3. GELU_AUX: aux[i, j] = D[i, j] (GELU's input, bias added);
//   4. GELU: D = gelu(D), the tanh form of kernels/unary_math.h (cuBLASLt's, as
//      PyTorch's _addmm_activation relies on);
//   5. DGELU: D[i, j] *= gelu'(aux[i, j]); DGELU_BGRAD then sums D's rows
//      into bias.
// A GPU sums in its own order: within float rounding of these sums.
#include <cublasLt.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/cuda/emulation/emulator.h"
#include "kernels/cuda/emulation/reference_gemm.h"
#include "kernels/unary_math.h"

struct cublasLtContext {};

struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  int32_t pointer_mode = 0;  // CUBLASLT_POINTER_MODE_HOST
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int32_t bias_type = -1;  // D's type
};

struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};

struct cublasLtMatmulPreferenceOpaque_t {
  uint32_t search_mode = 0;
  uint64_t max_workspace = 0;
};

namespace remat_emulation {
namespace {

bool is_bgrad(uint32_t e) { return e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB; }
bool adds_bias(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool applies_gelu(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX ||
         e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}
bool writes_aux(uint32_t e) { return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
bool reads_aux(uint32_t e) { return e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD; }
bool uses_bias(uint32_t e) { return adds_bias(e) || is_bgrad(e) || e == CUBLASLT_EPILOGUE_DGELU_BGRAD; }
bool emulated(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_DEFAULT || adds_bias(e) || applies_gelu(e) || reads_aux(e) || is_bgrad(e);
}
bool known(uint32_t e) {
  return emulated(e) || e == CUBLASLT_EPILOGUE_RELU || e == CUBLASLT_EPILOGUE_RELU_AUX ||
         e == CUBLASLT_EPILOGUE_DRELU || e == (CUBLASLT_EPILOGUE_RELU | CUBLASLT_EPILOGUE_BIAS) ||
         e == (CUBLASLT_EPILOGUE_RELU_AUX | CUBLASLT_EPILOGUE_BIAS) || e == (CUBLASLT_EPILOGUE_DRELU | 16);
}

// Keeps the reason for cublasLtGetStatusString. cuBLASLt answers with its
// status alone and leaves CUDA's last error as it was: the error set for
// the message is taken back at once, and none is set over a pending one.
cublasStatus_t fail(cublasStatus_t status, const std::string& why) {
  if (cudaPeekAtLastError() == cudaSuccess) {
    set_error(cudaErrorInvalidValue, "cublasLtMatmul: " + why);
    cudaGetLastError();
  }
  return status;
}

// The problem a matmul descriptor and four layouts describe, checked.
struct Problem {
  int m = 0, n = 0, k = 0;
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  bool tf32 = false;
  size_t element = 4;
};

cublasStatus_t check_problem(const cublasLtMatmulDescOpaque_t* desc, const cublasLtMatrixLayoutOpaque_t* a,
                             const cublasLtMatrixLayoutOpaque_t* b, const cublasLtMatrixLayoutOpaque_t* c,
                             const cublasLtMatrixLayoutOpaque_t* d, Problem& p) {
  if (!desc || !a || !b || !c || !d) return fail(CUBLAS_STATUS_INVALID_VALUE, "a descriptor is null");
  const auto op_ok = [](int32_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; };
  if (!op_ok(desc->transa) || !op_ok(desc->transb)) return fail(CUBLAS_STATUS_INVALID_VALUE, "bad transa/transb");
  const cudaDataType_t type = d->type;
  const bool types_match = a->type == type && b->type == type && c->type == type && desc->scale == type;
  const bool compute_fits = type == CUDA_R_32F
                                ? desc->compute == CUBLAS_COMPUTE_32F || desc->compute == CUBLAS_COMPUTE_32F_FAST_TF32
                                : desc->compute == CUBLAS_COMPUTE_64F;
  if (!types_match || !compute_fits) return fail(CUBLAS_STATUS_NOT_SUPPORTED, "types or compute type do not match");
  p.transa = desc->transa == CUBLAS_OP_N ? CUBLAS_OP_N : CUBLAS_OP_T;
  p.transb = desc->transb == CUBLAS_OP_N ? CUBLAS_OP_N : CUBLAS_OP_T;
  const uint64_t m = d->rows, n = d->cols, k = p.transa == CUBLAS_OP_N ? a->cols : a->rows;
  const uint64_t a_m = p.transa == CUBLAS_OP_N ? a->rows : a->cols;
  const uint64_t b_k = p.transb == CUBLAS_OP_N ? b->rows : b->cols, b_n = p.transb == CUBLAS_OP_N ? b->cols : b->rows;
  if (a_m != m || b_k != k || b_n != n || c->rows != m || c->cols != n) {
    return fail(CUBLAS_STATUS_INVALID_VALUE, "op(A) " + std::to_string(a_m) + " x " + std::to_string(k) + ", op(B) " +
                                                 std::to_string(b_k) + " x " + std::to_string(b_n) + ", C and D " +
                                                 std::to_string(m) + " x " + std::to_string(n) + " do not fit");
  }
  for (const auto* l : {a, b, c, d}) {
    if (l->ld < std::max<int64_t>(1, static_cast<int64_t>(l->rows)) || l->rows > INT32_MAX || l->cols > INT32_MAX) {
      return fail(CUBLAS_STATUS_INVALID_VALUE, "a leading dimension " + std::to_string(l->ld) + " below its rows " +
                                                   std::to_string(l->rows));
    }
  }
  const uint32_t e = desc->epilogue;
  if (!known(e)) return fail(CUBLAS_STATUS_INVALID_VALUE, "unknown epilogue " + std::to_string(e));
  if (!emulated(e)) return fail(CUBLAS_STATUS_NOT_SUPPORTED, "the ReLU epilogues are not emulated");
  if (desc->pointer_mode != 0) return fail(CUBLAS_STATUS_NOT_SUPPORTED, "only host pointers to alpha and beta");
  if (uses_bias(e) && desc->bias == nullptr) return fail(CUBLAS_STATUS_INVALID_VALUE, "the epilogue needs a bias pointer");
  if (desc->bias_type != -1 && desc->bias_type != type) return fail(CUBLAS_STATUS_NOT_SUPPORTED, "bias type != D's");
  if (writes_aux(e) || reads_aux(e)) {
    if (desc->aux == nullptr) return fail(CUBLAS_STATUS_INVALID_VALUE, "the epilogue needs an aux pointer");
    if (desc->aux_ld < static_cast<int64_t>(m) || desc->aux_ld % 8 != 0) {
      return fail(CUBLAS_STATUS_INVALID_VALUE, "aux ld " + std::to_string(desc->aux_ld) +
                                                   ": must be divisible by 8 and at least D's rows " +
                                                   std::to_string(m));
    }
  }
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k = static_cast<int>(k);
  p.tf32 = desc->compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  p.element = type == CUDA_R_32F ? 4 : 8;
  return CUBLAS_STATUS_SUCCESS;
}

// Steps 1-5 of the file's comment, after the GEMM wrote D.
template <class T>
void apply_epilogue(const Problem& p, uint32_t e, const T* a, int64_t lda, const T* b, int64_t ldb, T* d, int64_t ldd,
                    T* bias, T* aux, int64_t aux_ld) {
  const auto host_exp = [](T x) { return std::exp(x); };
  if (e == CUBLASLT_EPILOGUE_BGRADA) {  // op(A)[i, kk] is a[i + kk lda], or a[kk + i lda] transposed
    for (int i = 0; i < p.m; ++i) {
      T acc = T(0);
      for (int kk = 0; kk < p.k; ++kk) acc += p.transa == CUBLAS_OP_N ? a[i + kk * lda] : a[kk + i * lda];
      bias[i] = acc;
    }
  }
  if (e == CUBLASLT_EPILOGUE_BGRADB) {  // op(B)[kk, j] is b[kk + j ldb], or b[j + kk ldb] transposed
    for (int j = 0; j < p.n; ++j) {
      T acc = T(0);
      for (int kk = 0; kk < p.k; ++kk) acc += p.transb == CUBLAS_OP_N ? b[kk + j * ldb] : b[j + kk * ldb];
      bias[j] = acc;
    }
  }
  for (int j = 0; j < p.n; ++j) {
    for (int i = 0; i < p.m; ++i) {
      T& v = d[i + j * ldd];
      if (adds_bias(e)) v += bias[i];
      if (writes_aux(e)) aux[i + j * aux_ld] = v;
      if (applies_gelu(e)) v = remat::kernels::gelu_of<T>(v, host_exp);
      if (reads_aux(e)) v = remat::kernels::gelu_grad_of<T>(v, aux[i + j * aux_ld], host_exp);
    }
  }
  if (e == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
    for (int i = 0; i < p.m; ++i) {
      T acc = T(0);
      for (int j = 0; j < p.n; ++j) acc += d[i + j * ldd];
      bias[i] = acc;
    }
  }
}

template <class T>
Task matmul_task(const Problem& p, const cublasLtMatmulDescOpaque_t& desc, T alpha, const T* a, int64_t lda,
                 const T* b, int64_t ldb, T beta, const T* c, int64_t ldc, T* d, int64_t ldd) {
  Task task;
  task.what = "cublasLtMatmul (m " + std::to_string(p.m) + ", n " + std::to_string(p.n) + ", k " +
              std::to_string(p.k) + ", epilogue " + std::to_string(desc.epilogue) + ")";
  task.code = cudaErrorIllegalAddress;
  const uint32_t e = desc.epilogue;
  T* bias = static_cast<T*>(desc.bias);
  T* aux = static_cast<T*>(desc.aux);
  const int64_t aux_ld = desc.aux_ld;
  task.run = [=]() -> std::string {
    const bool na = p.transa == CUBLAS_OP_N, nb = p.transb == CUBLAS_OP_N;
    const bool reads_ab = p.k > 0 && (alpha != T(0) || is_bgrad(e));
    std::string err;
    if (reads_ab) err = check_device_range(a, span_bytes(na ? p.m : p.k, na ? p.k : p.m, lda, sizeof(T)), "A");
    if (err.empty() && reads_ab) {
      err = check_device_range(b, span_bytes(nb ? p.k : p.n, nb ? p.n : p.k, ldb, sizeof(T)), "B");
    }
    if (err.empty() && beta != T(0)) err = check_device_range(c, span_bytes(p.m, p.n, ldc, sizeof(T)), "C");
    if (err.empty()) err = check_device_range(d, span_bytes(p.m, p.n, ldd, sizeof(T)), "D");
    if (err.empty() && uses_bias(e)) {
      err = check_device_range(bias, static_cast<size_t>(e == CUBLASLT_EPILOGUE_BGRADB ? p.n : p.m) * sizeof(T), "bias");
    }
    if (err.empty() && aux != nullptr && (writes_aux(e) || reads_aux(e))) {
      err = check_device_range(aux, span_bytes(p.m, p.n, aux_ld, sizeof(T)), "aux");
    }
    if (!err.empty()) return err;
    if (c != d && beta != T(0)) {  // D = C first, then D = alpha op(A) op(B) + beta D
      for (int j = 0; j < p.n; ++j) std::memcpy(d + j * ldd, c + j * ldc, static_cast<size_t>(p.m) * sizeof(T));
    }
    reference_gemm(p.transa, p.transb, p.m, p.n, p.k, alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
                   d, static_cast<int>(ldd), p.tf32);
    apply_epilogue(p, e, a, lda, b, ldb, d, ldd, bias, aux, aux_ld);
    return std::string();
  };
  return task;
}

// A descriptor attribute's value from `buf`, when `size` is its size.
template <class V>
cublasStatus_t read_attribute(V& into, const void* buf, size_t size) {
  if (buf == nullptr || size != sizeof(V)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&into, buf, sizeof(V));
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace
}  // namespace remat_emulation

using namespace remat_emulation;

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  int count = 0;
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasLtGetStatusName(cublasStatus_t status) { return cublasGetStatusName(status); }
const char* cublasLtGetStatusString(cublasStatus_t status) { return cublasGetStatusString(status); }

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *desc = new cublasLtMatmulDescOpaque_t;
  (*desc)->compute = compute;
  (*desc)->scale = scale;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return read_attribute(desc->compute, buf, size);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return read_attribute(desc->scale, buf, size);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return read_attribute(desc->pointer_mode, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSA: return read_attribute(desc->transa, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return read_attribute(desc->transb, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return read_attribute(desc->epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return read_attribute(desc->bias, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return read_attribute(desc->aux, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return read_attribute(desc->aux_ld, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return read_attribute(desc->bias_type, buf, size);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (layout == nullptr || (type != CUDA_R_32F && type != CUDA_R_64F)) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return read_attribute(pref->search_mode, buf, size);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return read_attribute(pref->max_workspace, buf, size);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

// One algorithm for every problem the emulation answers, needing no workspace.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (pref == nullptr || requested < 1 || results == nullptr || returned == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *returned = 0;
  Problem p;
  if (const cublasStatus_t s = check_problem(desc, a, b, c, d, p); s != CUBLAS_STATUS_SUCCESS) return s;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].algo.data[0] = 1;
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_layout, const void* b, cublasLtMatrixLayout_t b_layout,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t*, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (alpha == nullptr || beta == nullptr || (workspace == nullptr && workspace_bytes > 0)) {
    return fail(CUBLAS_STATUS_INVALID_VALUE, "alpha, beta or the workspace is null");
  }
  Problem p;
  if (const cublasStatus_t s = check_problem(desc, a_layout, b_layout, c_layout, d_layout, p); s != CUBLAS_STATUS_SUCCESS) {
    return s;
  }
  if (c == d && c_layout->ld != d_layout->ld) return fail(CUBLAS_STATUS_INVALID_VALUE, "C == D with another layout");
  if (p.m == 0 || p.n == 0) return CUBLAS_STATUS_SUCCESS;
  Task task;
  if (d_layout->type == CUDA_R_32F) {
    task = matmul_task(p, *desc, *static_cast<const float*>(alpha), static_cast<const float*>(a), a_layout->ld,
                       static_cast<const float*>(b), b_layout->ld, *static_cast<const float*>(beta),
                       static_cast<const float*>(c), c_layout->ld, static_cast<float*>(d), d_layout->ld);
  } else {
    task = matmul_task(p, *desc, *static_cast<const double*>(alpha), static_cast<const double*>(a), a_layout->ld,
                       static_cast<const double*>(b), b_layout->ld, *static_cast<const double*>(beta),
                       static_cast<const double*>(c), c_layout->ld, static_cast<double*>(d), d_layout->ld);
  }
  return enqueue(stream, std::move(task)) == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
