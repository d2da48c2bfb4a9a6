// masked_fill kernel: out = mask != 0 ? value : x, with x and the mask read
// through strides over `shape` (0 on the mask's broadcast axes) and out dense.
// Its backward is the same map on the gradient with value 0.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

// out (shape) dense; x and mask strided; M is int64_t or T. out may be x
// when x is dense (each element is read before it is written).
template <class T, class M>
void masked_fill_forward(T* out, const T* x, const std::vector<int64_t>& x_strides, const M* mask,
                         const std::vector<int64_t>& mask_strides, const std::vector<int64_t>& shape, T value, Host = {});

// mask (t, t) = j > i: 1 above the diagonal, the positions a causal
// attention row may not read.
void causal_mask_forward(int64_t* mask, int64_t t, Host = {});

}  // namespace remat::kernels::cpu
