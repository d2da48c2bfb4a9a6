// The CUDA twins of kernels/cpu/unary.h: the same names and arguments, the
// stream last (Note [Kernels by device] in engine/kernel_call.h). Each
// element's math is kernels/math.h's where the CPU's is (GELU's gate uses
// the device's expf where the CPU's float path has its own polynomial:
// within a few ulp of each other, not always the same bits).
#pragma once

#include <cstdint>

#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

template <class T> void neg_forward(T* out, const T* x, int64_t n, Stream stream);
template <class T> void relu_forward(T* out, const T* x, int64_t n, Stream stream);
template <class T> void relu_backward(T* dx, const T* dout, const T* out, int64_t n, Stream stream);
template <class T> void tanh_forward(T* out, const T* x, int64_t n, Stream stream);
template <class T> void tanh_backward(T* dx, const T* dout, const T* out, int64_t n, Stream stream);
template <class T> void sigmoid_forward(T* out, const T* x, int64_t n, Stream stream);
template <class T> void sigmoid_backward(T* dx, const T* dout, const T* out, int64_t n, Stream stream);
template <class T> void exp_forward(T* out, const T* x, int64_t n, Stream stream);
template <class T> void exp_backward(T* dx, const T* dout, const T* out, int64_t n, Stream stream);
template <class T> void log_forward(T* out, const T* x, int64_t n, Stream stream);
template <class T> void log_backward(T* dx, const T* dout, const T* x, int64_t n, Stream stream);
template <class T> void gelu_forward(T* out, const T* x, int64_t n, Stream stream);
template <class T> void gelu_backward(T* dx, const T* dout, const T* x, int64_t n, Stream stream);
template <class T> void scale(T* out, const T* x, T factor, int64_t n, Stream stream);
template <class T> void fill(T* out, T value, int64_t n, Stream stream);

}  // namespace remat::kernels::cuda
