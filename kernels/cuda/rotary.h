// The CUDA twins of kernels/cpu/rotary.h: the (T, D/2) cos and sin table
// with CUDA's powf, cosf and sinf (within an ulp or two of the CPU's), and
// the rotation of x (B, H, T, D) by it, a thread a pair.
#pragma once

#include <cstdint>

#include "kernels/args.h"
#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

template <class T>
void rotary_table(T* cos, T* sin, int64_t len, int64_t dim, double theta, Stream stream);
template <class T>
void rotary_forward(T* out, const T* x, const T* cos, const T* sin, const RotaryDims& dims, Stream stream);
template <class T>
void rotary_backward(T* dx, const T* dout, const T* cos, const T* sin, const RotaryDims& dims, Stream stream);

}  // namespace remat::kernels::cuda
