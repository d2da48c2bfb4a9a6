// Shape and Strides: sizes and element steps of a tensor's axes, and the
// small helpers every layer needs (element counts, contiguous strides,
// negative-axis normalisation, printing as "(2, 3)").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace remat {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

int64_t numel(const Shape& shape);
Strides contiguous_strides(const Shape& shape);

// "(2, 3)"; a scalar prints as "()".
std::string str(const Shape& shape);

// Maps axis in [-dim, dim) to [0, dim); anything else is an error naming op.
int64_t normalize_axis(int64_t axis, int64_t dim, std::string_view op);

// NumPy broadcasting of two shapes; an error names op and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);

}  // namespace remat
