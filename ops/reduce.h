// Reductions: sum and mean over a set of axes (all axes when empty), max
// (values, differentiable) and argmax (int64 indices) over one axis.
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace remat {

Tensor sum(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
// The gradient of max goes to the first maximal element of each slice.
Tensor max(const Tensor& x, int64_t axis, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t axis, bool keepdim = false);

}  // namespace remat
