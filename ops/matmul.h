// matmul (2-D and batched, with broadcast batch axes), linear, affine and
// affine_gelu, through BLAS GEMM. Transposed views are passed to GEMM as
// transposes, not copied.
#pragma once

#include "engine/tensor.h"

namespace remat {

// (n, k) @ (k, m) -> (n, m); (..., n, k) @ (..., k, m) -> (..., n, m) with the
// leading axes broadcast. scale multiplies the product inside GEMM (its
// alpha, as torch.baddbmm's), with no pass over the output of its own:
// attention's scores are matmul(q, k^T, 1 / sqrt(head size)).
Tensor matmul(const Tensor& a, const Tensor& b, double scale = 1.0);

// y = x W^T + b for x (..., in), weight (out, in), bias (out) or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

// y = x W + b for x (..., in), weight (in, out), bias (out) or undefined: the
// layout of GPT-2's Conv1D layers, so their weights load without a transpose.
Tensor affine(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

// Whether linear, affine and affine_gelu with this weight fold the bias
// (and GELU) into cuBLASLt's GEMM epilogues: a CUDA weight and
// kernels::cuda::set_fused_epilogues(true) (Note [Fused epilogues] in
// kernels/cuda/gemm.h). Always false on the CPU.
bool fused_epilogues_apply(const Tensor& weight);

// gelu(affine(x, weight, bias)): where fused epilogues apply, one op,
// "affine_gelu", whose GEMM adds the bias and applies GELU in its epilogue
// (cuBLASLt's GELU is the tanh form of gelu(), to float rounding);
// elsewhere, or without a bias, the two ops affine and gelu.
Tensor affine_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace remat
