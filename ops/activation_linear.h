// A linear layer of an activation, as one op that keeps the activation's
// input, not its output: gelu_affine (GPT-2's MLP c_proj of its GELU) and
// swiglu_linear (Llama's down_proj of its SwiGLU). Backward makes the
// activation again, into a temporary, for the weight's gradient: the
// (rows, hidden) activation output is never saved (Apex's FusedDenseGeluDense
// at checkpoint level 1, FlashAttention's FusedMLP). Called by nn/gpt.cpp's
// GPTMlp and nn/llama.cpp's LlamaMLP; the unfused twins are affine(gelu(h))
// and linear(swiglu(gate, up)).
#pragma once

#include "engine/tensor.h"

namespace remat {

// affine(gelu(h), weight, bias) for h (..., in), weight (in, out) as GPT-2's
// Conv1D stores it, bias (out) or undefined -> (..., out). The values and
// gradients have the bits of the two ops (the same kernels in the same
// order, on either device). Saves h and the weight; with g = gelu(h):
//   dW = g^T dy (g made again from h),  db = sum over rows of dy,
//   dh = (dy W^T) gelu'(h).
Tensor gelu_affine(const Tensor& h, const Tensor& weight, const Tensor& bias = {});

// linear(swiglu(gate, up), weight, bias) for gate and up (..., in) of one
// shape and dtype, weight (out, in) as torch.nn.Linear stores it, bias (out)
// or undefined -> (..., out). Bits as the two ops. Saves gate, up and the
// weight; with s = silu(gate) up:
//   dW = dy^T s (s made again),  db = sum over rows of dy,  ds = dy W,
//   dgate = ds up silu'(gate),  dup = ds silu(gate).
Tensor swiglu_linear(const Tensor& gate, const Tensor& up, const Tensor& weight, const Tensor& bias = {});

}  // namespace remat
