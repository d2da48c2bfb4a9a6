// Shape ops: views that share storage (view, reshape of a contiguous tensor,
// transpose, permute, slice, expand) and copies (contiguous, concat,
// reshape of a non-contiguous tensor). All are differentiable; a view costs
// no bytes, and its backward maps the gradient back to the input's shape.
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace remat {

// Same elements in a new shape; one size may be -1. view() never copies and
// is an error on a tensor whose strides do not allow it; reshape() copies then.
Tensor view(const Tensor& x, const Shape& shape);
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, int64_t axis0, int64_t axis1);
Tensor permute(const Tensor& x, const std::vector<int64_t>& axes);
// Elements start, start+step, ... < end along axis (end is clamped to the size).
Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t end, int64_t step = 1);
// Broadcasts size-1 axes (and new leading axes) to `shape` without copying.
Tensor expand(const Tensor& x, const Shape& shape);
// x itself if already contiguous, else a dense copy.
Tensor contiguous(const Tensor& x);
Tensor concat(const Tensors& xs, int64_t axis);
// Sums x over broadcast axes down to `shape` (the backward of broadcasting).
Tensor sum_to_shape(const Tensor& x, const Shape& shape);

}  // namespace remat
