// The CUDA twins of kernels/cpu/rms_norm.h: rows (rows, channels), each
// row's 1/rms from a fixed-order sum of squares, and dweight summed per
// channel over rows in a fixed order (no atomics). `scratch` and `blocks`
// are the CPU's split of dweight's sum; the GPU ignores them.
#pragma once

#include <cstdint>

#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

template <class T>
void rms_norm_forward(T* out, T* rstd, const T* x, const T* weight, int64_t rows, int64_t channels, double eps,
                      Stream stream);
template <class T>
void rms_norm_apply(T* out, const T* rstd, const T* x, const T* weight, int64_t rows, int64_t channels,
                    Stream stream);
template <class T>
void rms_norm_backward(T* dx, T* dweight, T* scratch, const T* dout, const T* x, const T* weight, const T* rstd,
                       int64_t rows, int64_t channels, int64_t blocks, Stream stream);

}  // namespace remat::kernels::cuda
