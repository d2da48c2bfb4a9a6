// The CUDA twins of kernels/cpu/layer_norm.h: rows (rows, channels), the
// statistics of each row as the CPU computes them (a corrected two-pass),
// the weight and bias gradients summed per channel over rows in order.
// `scratch` and `blocks` are the CPU's split of the sums; the GPU ignores them.
#pragma once

#include <cstdint>

#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

template <class T>
void layer_norm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, int64_t rows,
                        int64_t channels, double eps, Stream stream);
template <class T>
void layer_norm_apply(T* out, const T* mean, const T* rstd, const T* x, const T* weight, const T* bias, int64_t rows,
                      int64_t channels, Stream stream);
template <class T>
void layer_norm_backward(T* dx, T* dweight, T* dbias, T* scratch, const T* dout, const T* x, const T* weight,
                         const T* mean, const T* rstd, int64_t rows, int64_t channels, int64_t blocks, Stream stream);

}  // namespace remat::kernels::cuda
