// The CUDA twins of kernels/cpu/gemm.h, through cuBLAS: row-major
// C (M, N) = alpha op(A) op(B) + beta C with the CPU's arguments, TF32 off
// unless set_allow_tf32 turned it on (cuBLAS's default math: float32
// products in float32). As on the CPU, K = 0 gives C = beta C, and with
// beta = 0 C is written, never read.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

// TF32 for float32 GEMMs on every GPU of the process, from the next call
// on: cuBLAS's CUBLAS_TF32_TENSOR_OP_MATH (A and B rounded to TF32's 10-bit
// mantissa, products summed in float32 on the tensor cores; about 1e-3
// relative error, 8x the float32 throughput of an H100 or H200). Off by
// default, as PyTorch's torch.backends.cuda.matmul.allow_tf32 and Hugging
// Face's TrainingArguments(tf32=None). double GEMMs and the CPU's kernels
// are unaffected.
void set_allow_tf32(bool allow);
bool allow_tf32();

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc, Stream stream);
template <class T>
void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                  const std::vector<int64_t>& a_strides, int64_t lda, const T* b, const std::vector<int64_t>& b_strides,
                  int64_t ldb, T* c, const std::vector<int64_t>& batch, Stream stream);
template <class T>
void repeat_rows(T* out, const T* row, int64_t rows, int64_t n, Stream stream);
template <class T>
void sum_rows(T* out, const T* x, int64_t rows, int64_t n, Stream stream);

}  // namespace remat::kernels::cuda
