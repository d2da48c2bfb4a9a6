// The CUDA twins of kernels/cpu/unary.h: the same names and arguments, the
// stream last (Note [Kernels by device] in engine/kernel_call.h). Each
// element's math is kernels/unary_math.h's, as on the CPU, with the device's
// exp, tanh and log (the CPU's float path has its own polynomials: within a
// few ulp of each other, not always the same bits).
#pragma once

#include <cstdint>

#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

template <class Math, class T> void unary_forward(T* out, const T* x, int64_t n, Stream stream);
template <class Math, class T> void unary_backward(T* dx, const T* dout, const T* v, int64_t n, Stream stream);
template <class T> void scale(T* out, const T* x, T factor, int64_t n, Stream stream);
template <class T> void fill(T* out, T value, int64_t n, Stream stream);

}  // namespace remat::kernels::cuda
