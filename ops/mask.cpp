// masked_fill and causal_mask; see mask.h. masked_fill saves only the mask
// (a (T, T) mask is small next to (B, H, T, T) scores) and reads it back
// broadcast, never expanded into a copy.
#include "ops/mask.h"

#include "engine/autograd.h"
#include "engine/kernel_call.h"
#include "kernels/mask.h"

namespace remat {
namespace {

// mask's strides seen from `shape` (mask broadcast to it): 0 on broadcast axes.
Strides broadcast_strides(const Tensor& mask, const Shape& shape) {
  Strides strides(shape.size(), 0);
  const size_t lead = shape.size() - mask.shape().size();
  for (size_t i = 0; i < mask.shape().size(); ++i) {
    strides[lead + i] = mask.shape()[i] == 1 ? 0 : mask.strides()[i];
  }
  return strides;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  }
  return true;
}

// out (shape, dense) = mask != 0 ? value : x, for either mask dtype.
template <class T>
void fill_where(const Tensor& out, const Tensor& x, const Tensor& mask, const Shape& shape, T value) {
  const Strides mask_strides = broadcast_strides(mask, shape);
  run_kernel(out, "masked_fill", [&](auto stream) {
    if (mask.dtype() == DType::Int64) {
      masked_fill_forward<T, int64_t>(out.data<T>(), x.data<T>(), x.strides(), mask.data<int64_t>(), mask_strides,
                                      shape, value, stream);
    } else {
      masked_fill_forward<T, T>(out.data<T>(), x.data<T>(), x.strides(), mask.data<T>(), mask_strides, shape, value,
                                stream);
    }
  });
}

class MaskedFillNode final : public Node {
 public:
  explicit MaskedFillNode(double value) : value_(value) {}
  std::string_view name() const override { return "masked_fill"; }

  Tensor forward(const Tensors& in) override {
    const Tensor& x = in[0];
    const Tensor& mask = in[1];
    REMAT_CHECK(mask.dtype() == DType::Int64 || mask.dtype() == x.dtype(),
                "masked_fill: mask must be int64 or x's dtype {}, got mask {}", dtype_name(x.dtype()), mask.str());
    REMAT_CHECK(broadcasts_to(mask.shape(), x.shape()), "masked_fill: mask {} does not broadcast to x {}",
                str(mask.shape()), str(x.shape()));
    Tensor out = new_output(in, x.shape(), x.dtype());
    dispatch_floating(x.dtype(), name(), [&]<class T>() {
      fill_where<T>(out, x, mask, x.shape(), static_cast<T>(value_));
    });
    return out;
  }

  void save(const Tensors& in, const Tensor&) override { save_value(in[1]); }

  // out = mask ? value : x:  dx = mask ? 0 : dout, over dout when nothing
  // else refers to it.
  Tensors backward(const Tensor& dout) override {
    const Tensor mask = saved(0);
    Tensor dx = owns_storage_alone(dout) ? dout : Tensor(dout.shape(), dout.dtype(), dout.device());
    dispatch_floating(dout.dtype(), name(), [&]<class T>() {
      fill_where<T>(dx, dout, mask, dout.shape(), T(0));
    });
    return {dx, Tensor()};
  }

  // A select, no arithmetic: no FLOPs.
  OpTraits traits() const override { return {.overwritable_input = 0}; }

 private:
  double value_;
};

}  // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  return apply_op(std::make_shared<MaskedFillNode>(value), {x, mask});
}

Tensor causal_mask(int64_t t, Device device) {
  REMAT_CHECK(t >= 0, "causal_mask: size {} is negative", t);
  Tensor mask({t, t}, DType::Int64, device);
  run_kernel(mask, "causal_mask", [&](auto stream) { causal_mask_forward(mask.data<int64_t>(), t, stream); });
  return mask;
}

}  // namespace remat
