// Shape helpers; see shape.h.
#include "engine/shape.h"

#include <algorithm>

#include "engine/error.h"

namespace remat {

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

std::string str(const Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + ")";
}

int64_t normalize_axis(int64_t axis, int64_t dim, std::string_view op) {
  REMAT_CHECK(axis >= -dim && axis < dim, "{}: axis {} is out of range for a tensor of {} dimensions", op, axis, dim);
  return axis < 0 ? axis + dim : axis;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  const size_t dim = std::max(a.size(), b.size());
  Shape out(dim);
  for (size_t i = 0; i < dim; ++i) {
    const int64_t sa = i < dim - a.size() ? 1 : a[i - (dim - a.size())];
    const int64_t sb = i < dim - b.size() ? 1 : b[i - (dim - b.size())];
    REMAT_CHECK(sa == sb || sa == 1 || sb == 1, "{}: shapes {} and {} cannot be broadcast (axis {}: {} vs {})", op,
                str(a), str(b), i, sa, sb);
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

}  // namespace remat
