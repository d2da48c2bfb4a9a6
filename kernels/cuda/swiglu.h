// The CUDA twins of kernels/cpu/swiglu.h: out = silu(gate) * up over dense
// arrays of n elements, and its backward, with unary_math.h's Silu on
// CUDA's exp (within an ulp or two of the CPU's, as silu's kernel is).
#pragma once

#include <cstdint>

#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

template <class T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n, Stream stream);
template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n, Stream stream);

}  // namespace remat::kernels::cuda
