// gelu_affine and swiglu_linear; see activation_linear.h. One node template
// runs both: the activation's kernels (kernels/unary.h's GELU,
// kernels/swiglu.h), then the linear layer's steps (ops/linear_steps.h), the
// calls the unfused pair makes. What differs from the pair is what is kept:
// the activation's output is a temporary of forward, and of backward, where
// the weight's gradient reads it (the move of the fused attention, which
// makes its probabilities again rather than keeping them). Memory: keep-all
// holds the activation's inputs only; the cost is one more elementwise pass
// in backward, next to the op's three GEMMs.
#include "ops/activation_linear.h"

#include <array>
#include <vector>

#include "engine/autograd.h"
#include "engine/kernel_call.h"
#include "kernels/swiglu.h"
#include "kernels/unary.h"
#include "ops/linear_steps.h"

namespace remat {
namespace {

using linear_steps::as_rows;
using linear_steps::WeightLayout;

// The activations, as the node template reads them: the op's name, how many
// inputs the activation has (the weight and bias follow them), the
// weight's layout, its FLOPs an element, and its forward and backward
// kernels over dense arrays of n elements.
struct GeluOf {
  static constexpr const char* kName = "gelu_affine";
  static constexpr size_t kInputs = 1;  // h
  static constexpr WeightLayout kLayout = WeightLayout::InOut;
  static constexpr int64_t kFlops = kernels::unary_flops<kernels::Gelu>();
  static void check(const Tensors&) {}
  template <class T, class Stream>
  static void forward(T* g, const std::array<Tensor, 1>& in, int64_t n, Stream stream) {
    unary_forward<kernels::Gelu>(g, in[0].data<T>(), n, stream);
  }
  // d gelu(h)/dh = gelu'(h):  dh = dg gelu'(h), written over dg.
  template <class T, class Stream>
  static void backward(const std::array<Tensor, 1>& dinputs, const T* dg, const std::array<Tensor, 1>& in, int64_t n,
                       Stream stream) {
    unary_backward<kernels::Gelu>(dinputs[0].data<T>(), dg, in[0].data<T>(), n, stream);
  }
};

struct SwigluOf {
  static constexpr const char* kName = "swiglu_linear";
  static constexpr size_t kInputs = 2;  // gate, up
  static constexpr WeightLayout kLayout = WeightLayout::OutIn;
  static constexpr int64_t kFlops = kernels::unary_flops<kernels::Silu>() + 1;  // silu, then the product with up
  static void check(const Tensors& in) {
    REMAT_CHECK(in[0].shape() == in[1].shape() && in[0].dtype() == in[1].dtype(),
                "swiglu_linear: gate {} and up {} must have one shape and dtype", in[0].str(), in[1].str());
  }
  template <class T, class Stream>
  static void forward(T* s, const std::array<Tensor, 2>& in, int64_t n, Stream stream) {
    swiglu_forward<T>(s, in[0].data<T>(), in[1].data<T>(), n, stream);
  }
  // s = silu(g) u:  dgate = ds u silu'(g) (written over ds),  dup = ds silu(g)
  template <class T, class Stream>
  static void backward(const std::array<Tensor, 2>& dinputs, const T* ds, const std::array<Tensor, 2>& in, int64_t n,
                       Stream stream) {
    const auto ptr = [](const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
    swiglu_backward<T>(ptr(dinputs[0]), ptr(dinputs[1]), ds, in[0].data<T>(), in[1].data<T>(), n, stream);
  }
};

template <class Act>
class ActivationLinearNode final : public Node {
  static constexpr size_t kWeight = Act::kInputs;  // the bias, if any, is input kWeight + 1
  using Inputs = std::array<Tensor, Act::kInputs>;

 public:
  std::string_view name() const override { return Act::kName; }

  Tensor forward(const Tensors& in) override {
    Act::check(in);
    const bool has_bias = in.size() == kWeight + 2;
    const Tensor& weight = in[kWeight];
    Tensors linear_in{in[0], weight};
    if (has_bias) linear_in.push_back(in[kWeight + 1]);
    const Shape out_shape = linear_steps::output_shape(name(), linear_in, Act::kLayout);
    // As linear's: decided by the weight, so a rehearsal on the meta device decides alike.
    fused_ = linear_steps::fused_bias(weight);
    Tensor out(out_shape, weight.dtype(), in[0].device());
    // The activation, (..., in): read by the GEMM, then let go.
    const Tensor a = activation(dense_inputs(in));
    linear_steps::forward_into(out, as_rows(a), weight, has_bias ? dense(in[kWeight + 1]) : Tensor(), Act::kLayout,
                               fused_);
    return out;
  }

  // The activation's inputs (read by dW's replay of it and by its
  // backward) and the weight (read by the activation's gradient): never
  // the activation itself.
  void save(const Tensors& in, const Tensor&) override {
    const bool any_input_grad = needs_activation_grad();
    for (size_t i = 0; i < Act::kInputs; ++i) save_value(any_input_grad || needs_input_grad(kWeight) ? in[i] : Tensor());
    save_value(any_input_grad ? in[kWeight] : Tensor());
  }

  // y = a W + b (or a W^T + b), a = act(inputs):  dW = a^T dy (a made
  // again),  db = sum over rows of dy,  da = dy W^T (or dy W),
  // dinputs = da act'(inputs). dW first, as linear's backward: the
  // temporary a goes before da is allocated, so the two are never alive
  // together.
  Tensors backward(const Tensor& dy) override {
    const Tensor dout = as_rows(dy);
    const int64_t out_features = dout.shape()[1];
    const bool has_bias = record().input_shapes.size() == kWeight + 2;
    Tensors grads(record().input_shapes.size());
    Tensor& dweight = grads[kWeight];
    Tensor dbias;
    const bool fuse_dbias = has_bias && needs_input_grad(kWeight) && needs_input_grad(kWeight + 1) && fused_;
    Inputs inputs;  // saved only where dW or the inputs' gradients read them
    if (needs_input_grad(kWeight) || needs_activation_grad()) {
      for (size_t i = 0; i < Act::kInputs; ++i) inputs[i] = dense(saved(i));
    }
    if (needs_input_grad(kWeight)) {
      // The recompute: the activation again, from the saved inputs, for dW only.
      const Tensor a = activation(inputs);
      dweight = Tensor(record().input_shapes[kWeight], dout.dtype(), dout.device());
      if (fuse_dbias) dbias = Tensor({out_features}, dout.dtype(), dout.device());
      linear_steps::weight_grad_into(dweight, dbias, as_rows(a), dout, Act::kLayout, fused_);
    }
    if (needs_activation_grad()) {
      const Tensor da(record().input_shapes[0], dout.dtype(), dout.device());
      linear_steps::input_grad_into(da, dout, saved(kWeight), Act::kLayout);
      Inputs dinputs;
      for (size_t i = 0; i < Act::kInputs; ++i) {
        if (!needs_input_grad(i)) continue;
        // The first input's gradient goes over da (the kernels read each
        // element before they write it); the other's (up's) is new.
        dinputs[i] = i == 0 ? da : Tensor(da.shape(), da.dtype(), da.device());
      }
      dispatch_floating(da.dtype(), name(), [&]<class T>() {
        run_kernel(da, name(), [&](auto stream) {
          Act::template backward<T>(dinputs, da.data<T>(), inputs, da.numel(), stream);
        });
      });
      for (size_t i = 0; i < Act::kInputs; ++i) grads[i] = dinputs[i];
    }
    if (has_bias && needs_input_grad(kWeight + 1)) {
      if (!fuse_dbias) {
        dbias = Tensor({out_features}, dout.dtype(), dout.device());
        linear_steps::bias_grad_into(dbias, dout);
      }
      grads[kWeight + 1] = dbias;
    }
    return grads;
  }

  // The GEMM and the activation, as the two ops count them; a replay is
  // forward again. Backward's second pass of the activation (for dW) is
  // measured by the Profiler with the rest of backward.
  OpTraits traits() const override {
    const int64_t hidden = record().input_shapes[0].back();
    return {.compute_bound = true,
            .flops = 2 * numel(record().output_shape) * hidden + Act::kFlops * numel(record().input_shapes[0])};
  }

 private:
  bool needs_activation_grad() const {
    for (size_t i = 0; i < Act::kInputs; ++i) {
      if (needs_input_grad(i)) return true;
    }
    return false;
  }

  static Inputs dense_inputs(const Tensors& in) {
    Inputs inputs;
    for (size_t i = 0; i < Act::kInputs; ++i) inputs[i] = dense(in[i]);
    return inputs;
  }

  // act(inputs), (..., in), into a new tensor.
  Tensor activation(const Inputs& inputs) const {
    const Tensor a(inputs[0].shape(), inputs[0].dtype(), inputs[0].device());
    dispatch_floating(a.dtype(), name(), [&]<class T>() {
      run_kernel(a, name(), [&](auto stream) { Act::template forward<T>(a.data<T>(), inputs, a.numel(), stream); });
    });
    return a;
  }

  bool fused_ = false;  // the bias (and its gradient) in the GEMMs' epilogues (linear_steps::fused_bias)
};

template <class Act>
Tensor activation_linear(Tensors inputs, const Tensor& weight, const Tensor& bias) {
  inputs.push_back(weight);
  if (bias.defined()) inputs.push_back(bias);
  return apply_op(std::make_shared<ActivationLinearNode<Act>>(), inputs);
}

}  // namespace

Tensor gelu_affine(const Tensor& h, const Tensor& weight, const Tensor& bias) {
  return activation_linear<GeluOf>({h}, weight, bias);
}

Tensor swiglu_linear(const Tensor& gate, const Tensor& up, const Tensor& weight, const Tensor& bias) {
  return activation_linear<SwigluOf>({gate, up}, weight, bias);
}

}  // namespace remat
