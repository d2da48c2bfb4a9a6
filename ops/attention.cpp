// causal_softmax; see attention.h. One node where GPT had two (masked_fill,
// softmax), no mask tensor, and only its output saved. The GPU's kernels
// read only each row's prefix (kernels/cuda/attention.cu); the CPU's run
// softmax's own on rows masked in cache, for its bits (kernels/cpu/attention.cpp).
#include "ops/attention.h"

#include <algorithm>

#include "engine/autograd.h"
#include "engine/kernel_call.h"
#include "kernels/attention.h"

namespace remat {
namespace {

// Scores in a row: x's last axis, T.
int64_t row_length(const Shape& shape) { return shape.back(); }

// The prefix elements of all rows: T (T + 1) / 2 per (T, T) matrix; 0
// before the record has its shape (new_output() asks for traits first).
int64_t prefix_elements(const Shape& shape) {
  if (shape.size() < 2 || row_length(shape) == 0) return 0;
  const int64_t t = row_length(shape);
  return numel(shape) / t * (t + 1) / 2;
}

class CausalSoftmaxNode final : public Node {
 public:
  std::string_view name() const override { return "causal_softmax"; }

  Tensor forward(const Tensors& in) override {
    Tensor out = new_output(in, in[0].shape(), in[0].dtype());  // before dense(): that is a second reference
    const Tensor x = dense(in[0]);
    const int64_t t = row_length(x.shape());
    dispatch_floating(x.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) {
        causal_softmax_forward<T>(out.data<T>(), x.data<T>(), x.numel() / std::max<int64_t>(t, 1), t, stream);
      });
    });
    return out;
  }

  void save(const Tensors&, const Tensor& out) override { save_value(out); }

  // y = softmax(x_i0..x_ii):  dx_ij = y_ij (dy_ij - sum_{k <= i} dy_ik y_ik), 0 for j > i.
  // dx over dout when nothing else refers to it: each row's dot product is
  // read whole before any of the row is written.
  Tensors backward(const Tensor& dout_any) override {
    const bool overwrite = owns_storage_alone(dout_any);
    const Tensor dout = dense(dout_any);
    const Tensor out = saved(0);
    Tensor dx = overwrite ? dout : Tensor(dout.shape(), dout.dtype(), dout.device());
    const int64_t t = row_length(dout.shape());
    dispatch_floating(dout.dtype(), name(), [&]<class T>() {
      run_kernel(dx, name(), [&](auto stream) {
        causal_softmax_backward<T>(dx.data<T>(), dout.data<T>(), out.data<T>(), dout.numel() / std::max<int64_t>(t, 1),
                                   t, stream);
      });
    });
    return {dx};
  }

  // softmax's 5 FLOPs an element, on the prefix only (max, x - m, exp, sum,
  // scale); memory-bound. A replay may write over its input: each element
  // of x is read before that element of the output is written.
  OpTraits traits() const override {
    return {.flops = 5 * prefix_elements(record().output_shape), .overwritable_input = 0};
  }
};

}  // namespace

Tensor causal_softmax(const Tensor& x) {
  REMAT_CHECK(x.dim() >= 2, "causal_softmax: x must be (..., T, T), got {} of {} axes", str(x.shape()), x.dim());
  REMAT_CHECK(x.size(-1) == x.size(-2), "causal_softmax: the last two axes of x must be square (T, T), got {}",
              str(x.shape()));
  REMAT_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float64, "causal_softmax: x must be float32 or float64, got {} of shape {}",
              dtype_name(x.dtype()), str(x.shape()));
  return apply_op(std::make_shared<CausalSoftmaxNode>(), {x});
}

}  // namespace remat
