// cuBLASLt as remat's emulated GPU offers it: the part kernels/cuda/gemm.cu
// calls (a handle, matmul and matrix-layout descriptors, the heuristic
// query, cublasLtMatmul with the bias, bias-gradient and GELU epilogues),
// with the toolkit's names and enum values, answered on the host
// (kernels/cuda/emulation/cublaslt.cpp). Not the whole library: no
// row-major or batched layouts, no ReLU or FP8 epilogues.
#pragma once

#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>

// library_types.h's data types (the ones the emulation answers).
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_64F = 1 };
using cudaDataType = cudaDataType_t;

// cublas_api.h's compute types: float32 (TF32 allowed or not) and float64.
enum cublasComputeType_t {
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_64F = 70,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};

struct cublasLtContext;
using cublasLtHandle_t = cublasLtContext*;
struct cublasLtMatmulDescOpaque_t;
using cublasLtMatmulDesc_t = cublasLtMatmulDescOpaque_t*;
struct cublasLtMatrixLayoutOpaque_t;
using cublasLtMatrixLayout_t = cublasLtMatrixLayoutOpaque_t*;
struct cublasLtMatmulPreferenceOpaque_t;
using cublasLtMatmulPreference_t = cublasLtMatmulPreferenceOpaque_t*;

struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};

struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};

enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,      // int32_t
  CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,        // int32_t
  CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,      // int32_t; host pointers only here
  CUBLASLT_MATMUL_DESC_TRANSA = 3,            // int32_t (cublasOperation_t)
  CUBLASLT_MATMUL_DESC_TRANSB = 4,            // int32_t
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,          // uint32_t (cublasLtEpilogue_t)
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,      // const void* (bias) or void* (bias gradient)
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,  // void* (GELU's input, out) or const void* (in)
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,  // int64_t
  CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,   // int32_t (cudaDataType), -1: D's type
};

// The epilogues, as the toolkit numbers them (ReLU's are not emulated:
// cublasLtMatmul answers CUBLAS_STATUS_NOT_SUPPORTED).
enum cublasLtEpilogue_t {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_RELU = 2,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_GELU = 32,
  CUBLASLT_EPILOGUE_GELU_BIAS = 36,
  CUBLASLT_EPILOGUE_RELU_AUX = 130,
  CUBLASLT_EPILOGUE_DRELU = 136,
  CUBLASLT_EPILOGUE_GELU_AUX = 160,
  CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 164,
  CUBLASLT_EPILOGUE_DGELU = 192,
  CUBLASLT_EPILOGUE_DGELU_BGRAD = 208,
  CUBLASLT_EPILOGUE_BGRADA = 256,
  CUBLASLT_EPILOGUE_BGRADB = 512,
};

enum cublasLtMatmulPreferenceAttributes_t {
  CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,          // uint32_t
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,  // uint64_t
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);
const char* cublasLtGetStatusName(cublasStatus_t status);
const char* cublasLtGetStatusString(cublasStatus_t status);

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size);

// A column-major (rows, cols) matrix with leading dimension ld.
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size);

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned);

// D = epilogue(alpha op(A) op(B) + beta C), column-major, on `stream`.
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_layout, const void* b, cublasLtMatrixLayout_t b_layout,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream);
