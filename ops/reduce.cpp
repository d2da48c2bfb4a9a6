// sum, mean, max, argmax; see reduce.h.
#include "ops/reduce.h"

#include <algorithm>
#include <tuple>

#include "engine/autograd.h"
#include "engine/kernel_call.h"
#include "kernels/reduce.h"
#include "ops/binary.h"
#include "ops/shape.h"

namespace remat {
namespace {

// Sorted, unique, non-negative axes; empty means all axes.
std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t dim, std::string_view op) {
  std::vector<int64_t> out;
  if (axes.empty()) {
    for (int64_t a = 0; a < dim; ++a) out.push_back(a);
    return out;
  }
  for (int64_t a : axes) out.push_back(normalize_axis(a, dim, op));
  std::sort(out.begin(), out.end());
  REMAT_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), "{}: an axis is repeated in {}", op, str(axes));
  return out;
}

// The shape with reduced axes set to 1 (keepdim) or removed.
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& axes, bool keepdim) {
  Shape out;
  for (size_t i = 0; i < shape.size(); ++i) {
    const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
    if (!reduced) out.push_back(shape[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

class SumNode final : public Node {
 public:
  SumNode(std::vector<int64_t> axes, bool keepdim) : axes_(std::move(axes)), keepdim_(keepdim) {}
  std::string_view name() const override { return "sum"; }

  Tensor forward(const Tensors& in) override {
    const Tensor& x = in[0];
    const Shape kept = reduced_shape(x.shape(), axes_, true);
    Tensor out(reduced_shape(x.shape(), axes_, keepdim_), x.dtype(), x.device());
    Strides out_strides = contiguous_strides(kept);
    for (int64_t a : axes_) out_strides[static_cast<size_t>(a)] = 0;
    dispatch_floating(x.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) {
        sum_to<T>(out.data<T>(), out.numel(), x.data<T>(), x.strides(), out_strides, x.shape(), stream);
      });
    });
    return out;
  }

  // d sum(x)/dx = 1: the gradient broadcast back over the reduced axes
  Tensors backward(const Tensor& dout) override {
    const Shape& in_shape = record().input_shapes[0];
    return {contiguous(expand(reshape(dout, reduced_shape(in_shape, axes_, true)), in_shape))};
  }

  OpTraits traits() const override { return {.flops = numel(record().input_shapes[0])}; }

 private:
  std::vector<int64_t> axes_;
  bool keepdim_;
};

class MaxNode final : public Node {
 public:
  MaxNode(int64_t axis, bool keepdim) : axis_(axis), keepdim_(keepdim) {}
  std::string_view name() const override { return "max"; }

  Tensor forward(const Tensors& in) override {
    auto [values, indices] = max_with_indices(in[0]);
    indices_ = indices;
    return values;
  }

  void save(const Tensors&, const Tensor&) override {
    save_value(indices_);
    indices_ = Tensor();
  }

  // d max(x)/dx = 1 at the (first) maximal element, 0 elsewhere
  Tensors backward(const Tensor& dout_any) override {
    const Shape& in_shape = record().input_shapes[0];
    const Tensor dout = contiguous(dout_any);
    const Tensor indices = saved(0);
    Tensor dx(in_shape, dout.dtype(), dout.device());
    // std::tie, not a structured binding: clang 14 cannot capture one in a lambda.
    int64_t outer = 0, n = 0, inner = 0;
    std::tie(outer, n, inner) = split(in_shape);
    dispatch_floating(dout.dtype(), name(), [&]<class T>() {
      run_kernel(dx, name(), [&](auto stream) {
        max_along_backward<T>(dx.data<T>(), indices.data<int64_t>(), dout.data<T>(), outer, n, inner, stream);
      });
    });
    return {dx};
  }

  // (values, indices) along axis_ of x.
  std::pair<Tensor, Tensor> max_with_indices(const Tensor& x_any) const {
    const Tensor x = dense(x_any);
    REMAT_CHECK(x.shape()[static_cast<size_t>(axis_)] > 0, "max: axis {} of tensor {} is empty", axis_, x.str());
    const Shape out_shape = reduced_shape(x.shape(), {axis_}, keepdim_);
    Tensor values(out_shape, x.dtype(), x.device());
    Tensor indices(out_shape, DType::Int64, x.device());
    int64_t outer = 0, n = 0, inner = 0;  // std::tie: see backward()
    std::tie(outer, n, inner) = split(x.shape());
    dispatch_floating(x.dtype(), name(), [&]<class T>() {
      run_kernel(values, name(), [&](auto stream) {
        max_along<T>(values.data<T>(), indices.data<int64_t>(), x.data<T>(), outer, n, inner, stream);
      });
    });
    return {values, indices};
  }

 private:
  std::tuple<int64_t, int64_t, int64_t> split(const Shape& shape) const {
    const auto a = static_cast<size_t>(axis_);
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < a; ++i) outer *= shape[i];
    for (size_t i = a + 1; i < shape.size(); ++i) inner *= shape[i];
    return {outer, shape[a], inner};
  }

  int64_t axis_;
  bool keepdim_;
  void discard_side_results() override { indices_ = Tensor(); }
  Tensor indices_;  // from forward to save(); not kept by the node
};

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return apply_op(std::make_shared<SumNode>(normalize_axes(axes, x.dim(), "sum"), keepdim), {x});
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  const std::vector<int64_t> normalized = normalize_axes(axes, x.dim(), "mean");
  int64_t count = 1;
  for (int64_t a : normalized) count *= x.shape()[static_cast<size_t>(a)];
  REMAT_CHECK(count > 0, "mean: reducing {} over empty axes {}", x.str(), str(normalized));
  // d mean(x)/dx = 1/count (through sum and the scalar division)
  return div(sum(x, normalized, keepdim), static_cast<double>(count));
}

Tensor max(const Tensor& x, int64_t axis, bool keepdim) {
  return apply_op(std::make_shared<MaxNode>(normalize_axis(axis, x.dim(), "max"), keepdim), {x});
}

Tensor argmax(const Tensor& x, int64_t axis, bool keepdim) {
  return MaxNode(normalize_axis(axis, x.dim(), "argmax"), keepdim).max_with_indices(x).second;
}

}  // namespace remat
