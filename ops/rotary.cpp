// rotary; see rotary.h. Forward and backward each make the (T, D/2) table
// of cos and sin on x's device (a tensor, so its bytes are counted) and
// rotate by it; nothing is saved: backward, the rotation by -angle, needs
// only dout. Measured on the CPU (2-core EPYC Zen 4, one thread): for q
// (8, 6, 256, 64) float32 the table takes about 34 us of the op's 146 us;
// a cache across calls would save that but hold bytes outside the counted
// allocator (and device memory on a GPU), so the table is made per call.
// A model that rotates q and k of every layer at one (T, D, theta) could
// instead make the table once a step, as Hugging Face's Llama does.
#include "ops/rotary.h"

#include "engine/autograd.h"
#include "engine/kernel_call.h"
#include "kernels/rotary.h"

namespace remat {
namespace {

// Where t's rows lie: t itself when its last axis is contiguous, else a
// dense copy (then `held` keeps it alive).
kernels::RotaryDims rotary_dims(const Tensor& t, Tensor& held) {
  held = t.strides()[3] == 1 ? t : contiguous_copy(t);
  const Shape& s = held.shape();
  const Strides& st = held.strides();
  return {.batch = s[0], .heads = s[1], .len = s[2], .dim = s[3], .batch_stride = st[0], .head_stride = st[1],
          .token_stride = st[2]};
}

class RotaryNode final : public Node {
 public:
  explicit RotaryNode(double theta) : theta_(theta) {}
  std::string_view name() const override { return "rotary"; }

  Tensor forward(const Tensors& in) override {
    const Tensor& x = in[0];
    REMAT_CHECK(x.dim() == 4 && x.shape()[3] > 0 && x.shape()[3] % 2 == 0,
                "rotary: input {} must be (B, H, T, D) with D even", x.str());
    Tensor read;
    const kernels::RotaryDims dims = rotary_dims(x, read);
    Tensor out(x.shape(), x.dtype(), x.device());
    rotate(out, read, dims, false);
    return out;
  }

  // y_i = x_i c - x_{i+h} s, y_{i+h} = x_{i+h} c + x_i s (a rotation R by +angle), so
  // dx = R^T dy: dx_i = dy_i c + dy_{i+h} s, dx_{i+h} = dy_{i+h} c - dy_i s,
  // i.e. dx = dy cos - rotate_half(dy) sin.
  Tensors backward(const Tensor& dout_any) override {
    Tensor read;
    const kernels::RotaryDims dims = rotary_dims(dout_any, read);
    Tensor dx(dout_any.shape(), dout_any.dtype(), dout_any.device());
    rotate(dx, read, dims, true);
    return {dx};
  }

  // Four products and two sums a pair: 3 FLOPs an element (the table,
  // B * H times smaller, is left out). Memory-bound.
  OpTraits traits() const override { return {.flops = 3 * numel(record().output_shape)}; }

 private:
  // out (B, H, T, D) = the rotation of `in` (laid out as dims) by +angle, or -angle.
  void rotate(const Tensor& out, const Tensor& in, const kernels::RotaryDims& dims, bool inverse) const {
    const int64_t half = dims.dim / 2;
    const Tensor table({2, dims.len, half}, in.dtype(), in.device());  // cos, then sin: (2, T, D/2)
    dispatch_floating(in.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) {
        T* cos = table.data<T>();
        T* sin = cos + dims.len * half;
        rotary_table<T>(cos, sin, dims.len, dims.dim, theta_, stream);
        if (inverse) rotary_backward<T>(out.data<T>(), in.data<T>(), cos, sin, dims, stream);
        else rotary_forward<T>(out.data<T>(), in.data<T>(), cos, sin, dims, stream);
      });
    });
  }
  double theta_;
};

}  // namespace

Tensor rotary(const Tensor& x, double theta) {
  REMAT_CHECK(theta > 0, "rotary: theta must be > 0, got {} (input {})", theta, x.str());
  return apply_op(std::make_shared<RotaryNode>(theta), {x});
}

}  // namespace remat
