// swiglu; see swiglu.h. One node instead of silu then mul: the (n)
// intermediate silu(gate) is neither written nor saved, and backward
// recomputes it from gate (one exp an element) while it makes both
// gradients in one pass.
#include "ops/swiglu.h"

#include "engine/autograd.h"
#include "engine/kernel_call.h"
#include "kernels/swiglu.h"
#include "kernels/unary_math.h"

namespace remat {
namespace {

class SwigluNode final : public Node {
 public:
  std::string_view name() const override { return "swiglu"; }

  // Inputs: gate, up.
  Tensor forward(const Tensors& in) override {
    REMAT_CHECK(in[0].shape() == in[1].shape() && in[0].dtype() == in[1].dtype(),
                "swiglu: gate {} and up {} must have one shape and dtype", in[0].str(), in[1].str());
    Tensor out = new_output(in, in[0].shape(), in[0].dtype());
    const Tensor gate = dense(in[0]), up = dense(in[1]);
    dispatch_floating(gate.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) {
        swiglu_forward<T>(out.data<T>(), gate.data<T>(), up.data<T>(), gate.numel(), stream);
      });
    });
    return out;
  }

  void save(const Tensors& in, const Tensor&) override {
    save_value(in[0]);
    save_value(in[1]);
  }

  // y = silu(g) u:  dy/dg = u silu'(g), silu'(g) = s(g) (1 + g (1 - s(g))),  dy/du = silu(g)
  // dgate goes over dout when nothing else refers to dout (read before written).
  Tensors backward(const Tensor& dout_any) override {
    const bool overwrite = owns_storage_alone(dout_any);
    const Tensor dout = dense(dout_any);
    const Tensor gate = dense(saved(0)), up = dense(saved(1));
    Tensor dgate, dup;
    if (needs_input_grad(0)) dgate = overwrite ? dout : Tensor(dout.shape(), dout.dtype(), dout.device());
    if (needs_input_grad(1)) dup = Tensor(dout.shape(), dout.dtype(), dout.device());
    dispatch_floating(dout.dtype(), name(), [&]<class T>() {
      run_kernel(dout, name(), [&](auto stream) {
        const auto ptr = [](const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
        swiglu_backward<T>(ptr(dgate), ptr(dup), dout.data<T>(), gate.data<T>(), up.data<T>(), dout.numel(), stream);
      });
    });
    return {dgate, dup};
  }

  // silu's FLOPs and the product with up, an element.
  OpTraits traits() const override {
    return {.flops = (kernels::unary_flops<kernels::Silu>() + 1) * numel(record().output_shape)};
  }
};

}  // namespace

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  return apply_op(std::make_shared<SwigluNode>(), {gate, up});
}

}  // namespace remat
