// Unary elementwise ops; see unary.h. One node template runs every element
// math of kernels/unary_math.h (its name, what backward reads, its FLOPs);
// an op is one line at the end that names its math, and one row of the
// table under it.
#include "ops/unary.h"

#include "engine/autograd.h"
#include "engine/kernel_call.h"
#include "kernels/unary.h"
#include "ops/shape.h"

namespace remat {
namespace {

template <class Math>
class UnaryNode final : public Node {
 public:
  std::string_view name() const override { return Math::kName; }

  Tensor forward(const Tensors& in) override {
    // contiguous_copy, not contiguous(): forward must record no node of its own.
    Tensor out = new_output(in, in[0].shape(), in[0].dtype());  // before dense(): that is a second reference
    const Tensor x = dense(in[0]);
    dispatch_floating(x.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) {
        unary_forward<Math>(out.data<T>(), x.data<T>(), x.numel(), stream);
      });
    });
    return out;
  }

  void save(const Tensors& in, const Tensor& out) override {
    if constexpr (Math::kReads == kernels::UnaryReads::Input) save_value(in[0]);
    if constexpr (Math::kReads == kernels::UnaryReads::Output) save_value(out);
  }

  // dx goes over dout when nothing else refers to dout (the kernels are
  // elementwise: each element is read before it is written).
  Tensors backward(const Tensor& dout_any) override {
    const bool overwrite = owns_storage_alone(dout_any);
    const Tensor dout = contiguous(dout_any);
    const Tensor read = Math::kReads == kernels::UnaryReads::Nothing ? dout : contiguous(saved(0));
    Tensor dx = overwrite ? dout : Tensor(dout.shape(), dout.dtype(), dout.device());
    dispatch_floating(dout.dtype(), name(), [&]<class T>() {
      run_kernel(dx, name(), [&](auto stream) {
        unary_backward<Math>(dx.data<T>(), dout.data<T>(), read.data<T>(), dout.numel(), stream);
      });
    });
    return {dx};
  }

  // Backward reading the input (GELU's) saves it, so a replay never holds it alone.
  OpTraits traits() const override {
    return {.flops = kernels::unary_flops<Math>() * numel(record().output_shape),
            .overwritable_input = Math::kReads == kernels::UnaryReads::Input ? -1 : 0};
  }
};

template <class Math>
Tensor unary(const Tensor& x) {
  return apply_op(std::make_shared<UnaryNode<Math>>(), {x});
}

// A row of unary_ops(): the op's function, its name and inputs from its math.
template <class Math>
constexpr UnaryOp row(Tensor (*fn)(const Tensor&)) {
  return {Math::kName, fn, Math::kDomain};
}

}  // namespace

Tensor neg(const Tensor& x) { return unary<kernels::Neg>(x); }
Tensor relu(const Tensor& x) { return unary<kernels::Relu>(x); }
Tensor tanh(const Tensor& x) { return unary<kernels::Tanh>(x); }
Tensor sigmoid(const Tensor& x) { return unary<kernels::Sigmoid>(x); }
Tensor exp(const Tensor& x) { return unary<kernels::Exp>(x); }
Tensor log(const Tensor& x) { return unary<kernels::Log>(x); }
Tensor gelu(const Tensor& x) { return unary<kernels::Gelu>(x); }
Tensor silu(const Tensor& x) { return unary<kernels::Silu>(x); }

std::span<const UnaryOp> unary_ops() {
  static constexpr UnaryOp kOps[] = {
      row<kernels::Neg>(&neg),
      row<kernels::Relu>(&relu),
      row<kernels::Tanh>(&tanh),
      row<kernels::Sigmoid>(&sigmoid),
      row<kernels::Exp>(&exp),
      row<kernels::Log>(&log),
      row<kernels::Gelu>(&gelu),
      row<kernels::Silu>(&silu),
  };
  return kOps;
}

}  // namespace remat
