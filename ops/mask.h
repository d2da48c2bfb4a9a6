// masked_fill (the causal mask of attention) and the mask itself.
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace remat {

// x where mask == 0, `value` where mask != 0; mask (int64 or float) is
// broadcast to x's shape. d/dx is 1 where kept, 0 where filled.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// int64 (t, t) on `device`: 1 above the diagonal (j > i, the future), 0 elsewhere.
Tensor causal_mask(int64_t t, Device device = Device::cpu());

}  // namespace remat
