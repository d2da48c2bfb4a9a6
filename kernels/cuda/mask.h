// The CUDA twins of kernels/cpu/mask.h.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

// out (dense, shape) = mask != 0 ? value : x, x and mask read through strides.
template <class T, class M>
void masked_fill_forward(T* out, const T* x, const std::vector<int64_t>& x_strides, const M* mask,
                         const std::vector<int64_t>& mask_strides, const std::vector<int64_t>& shape, T value,
                         Stream stream);
// mask (t, t) = j > i.
void causal_mask_forward(int64_t* mask, int64_t t, Stream stream);

}  // namespace remat::kernels::cuda
