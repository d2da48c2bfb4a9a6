// The CUDA twins of kernels/cpu/attention.h: the causal softmax of attention
// over dense (rows, n) scores, row r being row r % n of an (n, n) matrix.
#pragma once

#include <cstdint>

#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

// out (rows, n) = softmax over columns 0..i of row i, 0 after them. out may be x.
template <class T> void causal_softmax_forward(T* out, const T* x, int64_t rows, int64_t n, Stream stream);
// dx = out * (dout - sum_{j <= i}(dout * out)) on the prefix, 0 after it. dx may be dout.
template <class T>
void causal_softmax_backward(T* dx, const T* dout, const T* out, int64_t rows, int64_t n, Stream stream);

}  // namespace remat::kernels::cuda
