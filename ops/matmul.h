// matmul (2-D and batched, with broadcast batch axes), linear and affine,
// through BLAS GEMM. Transposed views are passed to GEMM as transposes, not copied.
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

}  // namespace remat
