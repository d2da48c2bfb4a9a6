// swiglu, Llama's MLP gate as one fused op: silu(gate) * up. Called by
// models (nn/) and Python; the kernels are kernels/swiglu.h.
#pragma once

#include "engine/tensor.h"

namespace remat {

// silu(gate) * up, silu(g) = g / (1 + e^-g), for gate and up of one shape
// and dtype (no broadcasting; any strides). One node that saves gate and up
// (not silu(gate)); the values and gradients have the bits of
// mul(silu(gate), up) on the CPU.
Tensor swiglu(const Tensor& gate, const Tensor& up);

}  // namespace remat
