// Unary elementwise kernels on dense arrays of n elements, forward and
// backward side by side. A backward reads whichever of x (the input) or
// out (the output) gives the cheaper derivative; the op saves that one.
#pragma once

#include <cstdint>

#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

template <class T> void neg_forward(T* out, const T* x, int64_t n, Host = {});
template <class T> void relu_forward(T* out, const T* x, int64_t n, Host = {});
template <class T> void relu_backward(T* dx, const T* dout, const T* out, int64_t n, Host = {});  // dout * [out > 0]
template <class T> void tanh_forward(T* out, const T* x, int64_t n, Host = {});
template <class T> void tanh_backward(T* dx, const T* dout, const T* out, int64_t n, Host = {});  // dout * (1 - out^2)
template <class T> void sigmoid_forward(T* out, const T* x, int64_t n, Host = {});
template <class T> void sigmoid_backward(T* dx, const T* dout, const T* out, int64_t n, Host = {});  // dout * out (1 - out)
template <class T> void exp_forward(T* out, const T* x, int64_t n, Host = {});
template <class T> void exp_backward(T* dx, const T* dout, const T* out, int64_t n, Host = {});  // dout * out
template <class T> void log_forward(T* out, const T* x, int64_t n, Host = {});
template <class T> void log_backward(T* dx, const T* dout, const T* x, int64_t n, Host = {});  // dout / x
// GELU, tanh approximation: out = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
template <class T> void gelu_forward(T* out, const T* x, int64_t n, Host = {});
// dout * (0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2))
template <class T> void gelu_backward(T* dx, const T* dout, const T* x, int64_t n, Host = {});

// out = x * scale (scale may be negative); out may equal x.
template <class T> void scale(T* out, const T* x, T factor, int64_t n, Host = {});
template <class T> void fill(T* out, T value, int64_t n, Host = {});

}  // namespace remat::kernels::cpu
