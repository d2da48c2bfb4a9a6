// Shape ops; see shape.h. Views are aliases of the input's storage built
// with Tensor::alias(); each backward maps the gradient to the input shape.
#include "ops/shape.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "engine/autograd.h"
#include "engine/factory.h"
#include "engine/kernel_call.h"
#include "kernels/copy.h"
#include "ops/reduce.h"

namespace remat {
namespace {

Shape infer_shape(const Shape& shape, int64_t count, std::string_view op, const Shape& from) {
  Shape out = shape;
  int64_t known = 1;
  int64_t free_axis = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      REMAT_CHECK(free_axis < 0, "{}: more than one -1 in shape {}", op, str(shape));
      free_axis = static_cast<int64_t>(i);
    } else {
      REMAT_CHECK(out[i] >= 0, "{}: negative size in shape {}", op, str(shape));
      known *= out[i];
    }
  }
  if (free_axis >= 0) {
    REMAT_CHECK(known != 0 && count % known == 0, "{}: cannot view {} elements of shape {} as {}", op, count, str(from),
                str(shape));
    out[static_cast<size_t>(free_axis)] = count / known;
  }
  REMAT_CHECK(numel(out) == count, "{}: cannot view {} elements of shape {} as {} ({} elements)", op, count, str(from),
              str(shape), numel(out));
  return out;
}

// Strides that show (shape, strides) as `target` without moving an element,
// or nullopt when no such strides exist (PyTorch's computeStride): each run
// of axes that is contiguous in memory may be split or merged freely.
std::optional<Strides> view_strides(const Shape& shape, const Strides& strides, const Shape& target) {
  if (numel(shape) == 0 || shape.empty()) return contiguous_strides(target);
  Strides out(target.size());
  int64_t view_axis = static_cast<int64_t>(target.size()) - 1;
  int64_t chunk_stride = strides.back();
  int64_t chunk_numel = 1, view_numel = 1;
  for (int64_t axis = static_cast<int64_t>(shape.size()) - 1; axis >= 0; --axis) {
    const auto a = static_cast<size_t>(axis);
    chunk_numel *= shape[a];
    const bool chunk_ends = axis == 0 || (shape[a - 1] != 1 && strides[a - 1] != chunk_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_axis >= 0 && (view_numel < chunk_numel || target[static_cast<size_t>(view_axis)] == 1)) {
      out[static_cast<size_t>(view_axis)] = view_numel * chunk_stride;
      view_numel *= target[static_cast<size_t>(view_axis)];
      --view_axis;
    }
    if (view_numel != chunk_numel) return std::nullopt;
    if (axis > 0) {
      chunk_stride = strides[a - 1];
      chunk_numel = 1;
      view_numel = 1;
    }
  }
  if (view_axis != -1) return std::nullopt;
  return out;
}

// view: same storage, new shape.
class ViewNode final : public Node {
 public:
  explicit ViewNode(Shape shape) : shape_(std::move(shape)) {}
  std::string_view name() const override { return "view"; }
  Tensor forward(const Tensors& in) override {
    const Tensor& x = in[0];
    const std::optional<Strides> strides = view_strides(x.shape(), x.strides(), shape_);
    REMAT_CHECK(strides.has_value(), "view: tensor {} with strides {} cannot be viewed as {} without a copy; use "
                "reshape(), which copies", x.str(), str(x.strides()), str(shape_));
    return x.alias(shape_, *strides, x.offset());
  }
  // d view(x)/dx: the same elements back in x's shape
  Tensors backward(const Tensor& dout) override { return {reshape(dout, record().input_shapes[0])}; }

 private:
  Shape shape_;
};

class PermuteNode final : public Node {
 public:
  explicit PermuteNode(std::vector<int64_t> axes) : axes_(std::move(axes)) {}
  std::string_view name() const override { return "permute"; }
  Tensor forward(const Tensors& in) override {
    const Tensor& x = in[0];
    Shape shape(axes_.size());
    Strides strides(axes_.size());
    for (size_t i = 0; i < axes_.size(); ++i) {
      shape[i] = x.shape()[static_cast<size_t>(axes_[i])];
      strides[i] = x.strides()[static_cast<size_t>(axes_[i])];
    }
    return x.alias(shape, strides, x.offset());
  }
  // d permute(x)/dx: the inverse permutation of the gradient
  Tensors backward(const Tensor& dout) override {
    std::vector<int64_t> inverse(axes_.size());
    for (size_t i = 0; i < axes_.size(); ++i) inverse[static_cast<size_t>(axes_[i])] = static_cast<int64_t>(i);
    return {permute(dout, inverse)};
  }

 private:
  std::vector<int64_t> axes_;
};

class SliceNode final : public Node {
 public:
  SliceNode(int64_t axis, int64_t start, int64_t end, int64_t step) : axis_(axis), start_(start), end_(end), step_(step) {}
  std::string_view name() const override { return "slice"; }
  Tensor forward(const Tensors& in) override {
    const Tensor& x = in[0];
    Shape shape = x.shape();
    Strides strides = x.strides();
    const auto a = static_cast<size_t>(axis_);
    shape[a] = end_ > start_ ? (end_ - start_ + step_ - 1) / step_ : 0;
    strides[a] *= step_;
    return x.alias(shape, strides, x.offset() + start_ * x.strides()[a]);
  }
  // d slice(x)/dx: the gradient placed in the sliced positions, zero elsewhere
  Tensors backward(const Tensor& dout) override {
    Tensor dx = zeros(record().input_shapes[0], dout.dtype(), dout.device());
    Tensor window = forward({dx});
    run_kernel(window, name(), [&](auto stream) {
      strided_copy(window.raw_data(), window.strides(), dout.raw_data(), dout.strides(), dtype_size(dout.dtype()),
                   dout.shape(), stream);
    });
    return {dx};
  }

 private:
  int64_t axis_, start_, end_, step_;
};

class ExpandNode final : public Node {
 public:
  explicit ExpandNode(Shape shape) : shape_(std::move(shape)) {}
  std::string_view name() const override { return "expand"; }
  Tensor forward(const Tensors& in) override {
    const Tensor& x = in[0];
    REMAT_CHECK(shape_.size() >= x.shape().size(), "expand: cannot expand {} to fewer axes {}", str(x.shape()),
                str(shape_));
    const size_t lead = shape_.size() - x.shape().size();
    for (int64_t s : shape_) REMAT_CHECK(s >= 0, "expand: negative size in target shape {} (from {})", str(shape_), str(x.shape()));
    Strides strides(shape_.size(), 0);
    for (size_t i = 0; i < x.shape().size(); ++i) {
      const int64_t from = x.shape()[i], to = shape_[lead + i];
      REMAT_CHECK(from == to || from == 1, "expand: cannot expand {} to {} (axis {}: {} to {})", str(x.shape()),
                  str(shape_), lead + i, from, to);
      strides[lead + i] = from == to ? x.strides()[i] : 0;
    }
    return x.alias(shape_, strides, x.offset());
  }
  // d expand(x)/dx: sum of the gradient over the broadcast axes
  Tensors backward(const Tensor& dout) override { return {sum_to_shape(dout, record().input_shapes[0])}; }

 private:
  Shape shape_;
};

class ContiguousNode final : public Node {
 public:
  std::string_view name() const override { return "contiguous"; }
  Tensor forward(const Tensors& in) override { return contiguous_copy(in[0]); }
  // d copy(x)/dx = 1
  Tensors backward(const Tensor& dout) override { return {dout}; }
};

class ConcatNode final : public Node {
 public:
  explicit ConcatNode(int64_t axis) : axis_(axis) {}
  std::string_view name() const override { return "concat"; }
  Tensor forward(const Tensors& in) override {
    const auto a = static_cast<size_t>(axis_);
    Shape shape = in[0].shape();
    shape[a] = 0;
    for (const Tensor& x : in) {
      REMAT_CHECK(x.dim() == in[0].dim() && x.dtype() == in[0].dtype(), "concat: cannot join {} and {}", in[0].str(),
                  x.str());
      for (size_t i = 0; i < shape.size(); ++i) {
        REMAT_CHECK(i == a || x.shape()[i] == in[0].shape()[i], "concat: shapes {} and {} differ on axis {} (not the "
                    "concat axis {})", str(in[0].shape()), str(x.shape()), i, axis_);
      }
      shape[a] += x.shape()[a];
    }
    Tensor out(shape, in[0].dtype(), in[0].device());
    int64_t start = 0;
    for (const Tensor& x : in) {
      Tensor window = SliceNode(axis_, start, start + x.shape()[a], 1).forward({out});
      run_kernel(window, name(), [&](auto stream) {
        strided_copy(window.raw_data(), window.strides(), x.raw_data(), x.strides(), dtype_size(x.dtype()), x.shape(),
                     stream);
      });
      start += x.shape()[a];
    }
    return out;
  }
  // d concat(x_0, ..., x_k)/dx_i: the i-th window of the gradient
  Tensors backward(const Tensor& dout) override {
    Tensors grads;
    int64_t start = 0;
    for (const Shape& shape : record().input_shapes) {
      const int64_t size = shape[static_cast<size_t>(axis_)];
      grads.push_back(slice(dout, axis_, start, start + size));
      start += size;
    }
    return grads;
  }

 private:
  int64_t axis_;
};

}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  return apply_op(std::make_shared<ViewNode>(infer_shape(shape, x.numel(), "view", x.shape())), {x});
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  const Shape target = infer_shape(shape, x.numel(), "reshape", x.shape());
  if (target == x.shape()) return x;
  if (view_strides(x.shape(), x.strides(), target)) return view(x, target);
  return view(contiguous(x), target);
}

Tensor transpose(const Tensor& x, int64_t axis0, int64_t axis1) {
  std::vector<int64_t> axes(static_cast<size_t>(x.dim()));
  std::iota(axes.begin(), axes.end(), 0);
  std::swap(axes[static_cast<size_t>(normalize_axis(axis0, x.dim(), "transpose"))],
            axes[static_cast<size_t>(normalize_axis(axis1, x.dim(), "transpose"))]);
  return permute(x, axes);
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& axes) {
  REMAT_CHECK(static_cast<int64_t>(axes.size()) == x.dim(), "permute: {} axes given for tensor {}", axes.size(), x.str());
  std::vector<int64_t> normalized(axes.size());
  std::vector<bool> seen(axes.size(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    normalized[i] = normalize_axis(axes[i], x.dim(), "permute");
    REMAT_CHECK(!seen[static_cast<size_t>(normalized[i])], "permute: axis {} repeated in {}", axes[i], str(axes));
    seen[static_cast<size_t>(normalized[i])] = true;
  }
  return apply_op(std::make_shared<PermuteNode>(normalized), {x});
}

Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t end, int64_t step) {
  const int64_t a = normalize_axis(axis, x.dim(), "slice");
  const int64_t size = x.shape()[static_cast<size_t>(a)];
  REMAT_CHECK(step > 0, "slice: step must be positive, got {}", step);
  if (start < 0) start += size;
  if (end < 0) end += size;
  end = std::min(end, size);
  REMAT_CHECK(start >= 0 && start <= size, "slice: start {} is out of range for axis {} of size {} (tensor {})", start,
              axis, size, x.str());
  end = std::max(end, start);
  return apply_op(std::make_shared<SliceNode>(a, start, end, step), {x});
}

Tensor expand(const Tensor& x, const Shape& shape) {
  if (shape == x.shape()) return x;
  return apply_op(std::make_shared<ExpandNode>(shape), {x});
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  return apply_op(std::make_shared<ContiguousNode>(), {x});
}

Tensor concat(const Tensors& xs, int64_t axis) {
  REMAT_CHECK(!xs.empty(), "concat: no tensors given");
  return apply_op(std::make_shared<ConcatNode>(normalize_axis(axis, xs[0].dim(), "concat")), xs);
}

Tensor sum_to_shape(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  REMAT_CHECK(shape.size() <= x.shape().size(), "sum_to_shape: cannot sum {} to more axes {}", str(x.shape()), str(shape));
  const size_t lead = x.shape().size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    REMAT_CHECK(shape[i] == x.shape()[lead + i] || shape[i] == 1, "sum_to_shape: {} does not broadcast to {} (axis {})",
                str(shape), str(x.shape()), lead + i);
  }
  std::vector<int64_t> axes;
  for (size_t i = 0; i < x.shape().size(); ++i) {
    if (i < lead || (shape[i - lead] == 1 && x.shape()[i] != 1)) axes.push_back(static_cast<int64_t>(i));
  }
  return reshape(sum(x, axes, /*keepdim=*/true), shape);
}

}  // namespace remat
