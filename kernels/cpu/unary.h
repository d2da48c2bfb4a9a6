// Unary elementwise kernels on dense arrays of n elements: one forward and
// one backward for every element math of kernels/unary_math.h (instantiated
// for each entry of REMAT_UNARY_MATHS, float and double), then scale and fill.
#pragma once

#include <cstdint>

#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

// out = Math::forward(x); out may equal x.
template <class Math, class T> void unary_forward(T* out, const T* x, int64_t n, Host = {});
// dx = Math::backward(dout, v), v the input x or the output out as Math::kReads
// says (not read where it says Nothing); dx may equal dout.
template <class Math, class T> void unary_backward(T* dx, const T* dout, const T* v, int64_t n, Host = {});

// out = x * scale (scale may be negative); out may equal x.
template <class T> void scale(T* out, const T* x, T factor, int64_t n, Host = {});
template <class T> void fill(T* out, T value, int64_t n, Host = {});

}  // namespace remat::kernels::cpu
