// The CUDA twins of kernels/cpu/gemm.h, through cuBLAS: row-major
// C (M, N) = alpha op(A) op(B) + beta C with the CPU's arguments, TF32 off
// unless set_allow_tf32 turned it on (cuBLAS's default math: float32
// products in float32). As on the CPU, K = 0 gives C = beta C, and with
// beta = 0 C is written, never read. gemm_bias, gemm_bias_gelu and
// gemm_bias_grad, GPU-only, fold a bias (and GELU) or the bias gradient into
// the GEMM through cuBLASLt's epilogues; the ops call them where
// set_fused_epilogues turned them on (Note [Fused epilogues]).
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

// Note [Fused epilogues]
// cuBLASLt can finish a GEMM with a bias added to every row, or with the
// sums of an operand over K (a bias gradient), in the same kernel: linear's
// forward is then one cublasLtMatmul instead of repeat_rows and a GEMM that
// reads C back (beta = 1), and its weight gradient's GEMM also gives the
// bias gradient, with no sum_rows pass over dout; GPT's MLP runs c_fc and
// GELU as one GEMM (affine_gelu, ops/matmul.h). Off by default: the
// results differ from the unfused path by float rounding (the epilogue adds
// the bias to the finished product, and cuBLASLt sums the bias gradient in
// its own order), so a run is bit-identical to its past only with it off.
// The ops ask it for a CUDA weight only (fused_epilogues_apply, decided by
// the weight so that a step rehearsed on the meta device records the
// nodes the real one does); the CPU has no fused path and never changes.
// It has run on the emulated GPU only (kernels/cuda/emulation/cublaslt.cpp),
// never on a GPU; docs/gpu/kernels.md has what it saves at W3.
void set_fused_epilogues(bool on);
bool fused_epilogues();

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc, Stream stream);
template <class T>
void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                  const std::vector<int64_t>& a_strides, int64_t lda, const T* b, const std::vector<int64_t>& b_strides,
                  int64_t ldb, T* c, const std::vector<int64_t>& batch, Stream stream);
// C (M, N) = op(A) op(B) + bias, bias (N) added to every row in the GEMM's
// epilogue: one cublasLtMatmul with CUBLASLT_EPILOGUE_BIAS (falling back to
// C filled with the bias and a gemm adding to it where cuBLASLt has no
// kernel for the problem).
template <class T>
void gemm_bias(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
               int64_t ldb, const T* bias, T* c, int64_t ldc, Stream stream);

// C (M, N) = gelu(op(A) op(B) + bias) and pre (M, N) = op(A) op(B) + bias,
// GELU's input kept for backward, both dense, in the GEMM's epilogue:
// CUBLASLT_EPILOGUE_GELU_AUX_BIAS, pre as its aux matrix. cuBLASLt's GELU
// is the tanh form, kernels/unary_math.h's gelu_of (to float rounding: its
// tanh is not our exp-based sigmoid). Falls back to gemm_bias and
// unary_forward<Gelu> where N is not a multiple of 8 (cuBLASLt's rule for the aux
// matrix's leading dimension) or cuBLASLt has no kernel for the problem.
template <class T>
void gemm_bias_gelu(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
                    int64_t ldb, const T* bias, T* c, T* pre, Stream stream);

// Whose sums over K a bias gradient is: op(A)'s rows (dbias (M)) or op(B)'s
// columns (dbias (N)).
enum class BiasGradOf { A, B };
// C (M, N) = op(A) op(B) and, in the same call's epilogue, dbias = the sums
// over K of op(A) or op(B): cuBLASLt's CUBLASLT_EPILOGUE_BGRADB or BGRADA
// (column-major, its B is our A). Falls back to gemm and a fixed-order sum
// where cuBLASLt has no kernel for the problem.
template <class T>
void gemm_bias_grad(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
                    int64_t ldb, T* c, int64_t ldc, T* dbias, BiasGradOf of, Stream stream);

template <class T>
void repeat_rows(T* out, const T* row, int64_t rows, int64_t n, Stream stream);
template <class T>
void sum_rows(T* out, const T* x, int64_t rows, int64_t n, Stream stream);  // sum_to over the rows (reduce.h)

}  // namespace remat::kernels::cuda
