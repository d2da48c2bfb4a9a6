// REMAT_CUDA_CHECK and REMAT_CUBLAS_CHECK: a failed CUDA or cuBLAS call
// throws std::runtime_error with the call, the library's error name and
// message, and file:line (kernels know nothing of engine/error.h, whose
// REMAT_CHECK they mirror). For .cu files of kernels/cuda/ only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace remat::kernels::cuda {

[[noreturn]] inline void fail(const char* call, const std::string& error, const char* file, int line) {
  throw std::runtime_error(std::string("CUDA: ") + call + " failed: " + error + " [" + file + ":" +
                           std::to_string(line) + "]");
}

}  // namespace remat::kernels::cuda

#define REMAT_CUDA_CHECK(call)                                                                                  \
  do {                                                                                                          \
    const cudaError_t remat_cuda_status = (call);                                                               \
    if (remat_cuda_status != cudaSuccess) {                                                                     \
      ::remat::kernels::cuda::fail(#call,                                                                       \
                                   std::string(cudaGetErrorName(remat_cuda_status)) + " (" +                    \
                                       cudaGetErrorString(remat_cuda_status) + ")",                             \
                                   __FILE__, __LINE__);                                                         \
    }                                                                                                           \
  } while (0)

#define REMAT_CUBLAS_CHECK(call)                                                                                \
  do {                                                                                                          \
    const cublasStatus_t remat_cublas_status = (call);                                                          \
    if (remat_cublas_status != CUBLAS_STATUS_SUCCESS) {                                                         \
      ::remat::kernels::cuda::fail(#call,                                                                       \
                                   std::string(cublasGetStatusName(remat_cublas_status)) + " (" +               \
                                       cublasGetStatusString(remat_cublas_status) + ")",                        \
                                   __FILE__, __LINE__);                                                         \
    }                                                                                                           \
  } while (0)

// After a launch: the launch's own error (a bad configuration), at once.
#define REMAT_CUDA_LAUNCHED() REMAT_CUDA_CHECK(cudaGetLastError())
