// The CUDA twins of kernels/cpu/dropout.h: the mask drawn with the same
// Philox words and rule (kernels/math.h), so both devices keep the same
// elements.
#pragma once

#include <cstdint>

#include "kernels/args.h"
#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

template <class T> void dropout_forward(T* out, const T* x, int64_t n, const DropoutMask& mask, T scale, Stream stream);
template <class T> void dropout_backward(T* dx, const T* dout, int64_t n, const DropoutMask& mask, T scale, Stream stream);

}  // namespace remat::kernels::cuda
