// rms_norm over the last axis (Llama's RMSNorm), with a fused forward and
// backward kernel, and rms_norm_reference, the same function composed of
// primitive ops (mul, mean, exp, log), which tests use to check the fused
// one. Called by models (nn/) and Python; the kernels are kernels/rms_norm.h.
#pragma once

#include "engine/tensor.h"

namespace remat {

// y = x / sqrt(mean_C(x^2) + eps) * weight over the last axis of x (..., C);
// weight is (C) or undefined (then 1). As Hugging Face's LlamaRMSNorm
// (weight * (x * rsqrt(mean(x^2) + eps))), but computed in x's dtype
// (float64 stays float64). Saves x, weight and each row's 1/rms.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6);
Tensor rms_norm_reference(const Tensor& x, const Tensor& weight, double eps = 1e-6);

}  // namespace remat
