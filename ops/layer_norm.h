// layer_norm over the last axis, with a fused forward and backward kernel,
// and layer_norm_reference, the same function composed of primitive ops
// (mean, sub, mul, ...), which tests use to check the fused one.
#pragma once

#include "engine/tensor.h"

namespace remat {

// y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis of x
// (..., C); weight and bias are (C) or undefined (then 1 and 0). var is the
// biased variance, as in torch.nn.LayerNorm.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
Tensor layer_norm_reference(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

}  // namespace remat
