// layer_norm and layer_norm_reference; see layer_norm.h.
//
// The fused op keeps x, weight and each row's mean and 1/std for backward
// (not the output, and not bias, which backward never reads). Mean and rstd
// are side results of forward(): the node holds them from forward() to
// save(), as CrossEntropyNode does with its log-probabilities. A replay of
// a dropped output reads them back instead of computing them again.
#include "ops/layer_norm.h"

#include "engine/autograd.h"
#include "engine/kernel_call.h"
#include "kernels/layer_norm.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/unary.h"

namespace remat {
namespace {


class LayerNormNode final : public Node {
 public:
  LayerNormNode(double eps, bool has_weight, bool has_bias) : eps_(eps), has_weight_(has_weight), has_bias_(has_bias) {}
  std::string_view name() const override { return "layer_norm"; }

  // Inputs: x, then weight if given, then bias if given.
  Tensor forward(const Tensors& in) override {
    const Tensor x = dense(in[0]);
    REMAT_CHECK(x.dim() >= 1 && x.shape().back() > 0, "layer_norm: input {} has no channels to normalise", x.str());
    const int64_t channels = x.shape().back(), rows = x.numel() / channels;
    const Tensor weight = has_weight_ ? dense(in[1]) : Tensor();
    const Tensor bias = has_bias_ ? dense(in[has_weight_ ? 2 : 1]) : Tensor();
    for (const Tensor* p : {&weight, &bias}) {
      if (!p->defined()) continue;
      REMAT_CHECK(p->shape() == Shape{channels} && p->dtype() == x.dtype(), "layer_norm: {} {} does not fit input {} "
                  "(expected {} ({}))", p == &weight ? "weight" : "bias", p->str(), x.str(), dtype_name(x.dtype()),
                  channels);
    }
    Tensor out(x.shape(), x.dtype(), x.device());
    if (replaying()) {
      // The mean and rstd saved the first time are this x's: one pass over
      // it instead of three, and the same bits (layer_norm_apply).
      const Tensor mean = saved(2), rstd = saved(3);
      REMAT_CHECK(mean.numel() == rows && rstd.numel() == rows && mean.dtype() == x.dtype(),
                  "layer_norm: replaying on input {} with saved statistics {} that are not its rows'", x.str(),
                  mean.str());
      dispatch_floating(x.dtype(), name(), [&]<class T>() {
        run_kernel(out, name(), [&](auto stream) {
          layer_norm_apply<T>(out.data<T>(), mean.data<T>(), rstd.data<T>(), x.data<T>(),
                              has_weight_ ? weight.data<T>() : nullptr, has_bias_ ? bias.data<T>() : nullptr, rows,
                              channels, stream);
        });
      });
      return out;
    }
    mean_ = Tensor({rows}, x.dtype(), x.device());
    rstd_ = Tensor({rows}, x.dtype(), x.device());
    dispatch_floating(x.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) {
        layer_norm_forward<T>(out.data<T>(), mean_.data<T>(), rstd_.data<T>(), x.data<T>(),
                              has_weight_ ? weight.data<T>() : nullptr, has_bias_ ? bias.data<T>() : nullptr, rows,
                              channels, eps_, stream);
      });
    });
    return out;
  }

  void save(const Tensors& in, const Tensor&) override {
    save_value(in[0]);
    save_value(has_weight_ ? in[1] : Tensor());
    save_value(mean_);
    save_value(rstd_);
    mean_ = Tensor();
    rstd_ = Tensor();
  }

  // xhat = (x - mean) rstd, y = xhat w + b, g = dy w:
  // dx = rstd (g - mean_C(g) - xhat mean_C(g xhat)),  dw = sum_rows dy xhat,  db = sum_rows dy
  Tensors backward(const Tensor& dout_any) override {
    const Tensor dout = dense(dout_any);
    const Tensor x = dense(saved(0));
    const Tensor weight = has_weight_ ? dense(saved(1)) : Tensor();
    const Tensor mean = saved(2), rstd = saved(3);
    const int64_t channels = x.shape().back(), rows = x.numel() / channels;
    const size_t bias_index = has_weight_ ? 2 : 1;
    Tensor dx, dweight, dbias;
    if (needs_input_grad(0)) dx = Tensor(x.shape(), x.dtype(), x.device());
    if (has_weight_ && needs_input_grad(1)) dweight = Tensor({channels}, x.dtype(), x.device());
    if (has_bias_ && needs_input_grad(bias_index)) dbias = Tensor({channels}, x.dtype(), x.device());
    // The CPU kernel's blocks of rows size its scratch (dweight's and
    // dbias's partial sums), which the op allocates so that it is counted; a
    // rehearsal on the meta device counts the same bytes.
    const int64_t blocks = kernels::cpu::layer_norm_backward_blocks(rows, channels);
    const bool sums = dweight.defined() || dbias.defined();
    const int64_t scratch_size = sums ? kernels::cpu::layer_norm_backward_scratch(blocks, channels) : 0;
    const Tensor scratch = scratch_size > 0 ? Tensor({scratch_size}, x.dtype(), x.device()) : Tensor();
    dispatch_floating(x.dtype(), name(), [&]<class T>() {
      run_kernel(dout, name(), [&](auto stream) {
        const auto ptr = [](const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
        layer_norm_backward<T>(ptr(dx), ptr(dweight), ptr(dbias), ptr(scratch), dout.data<T>(), x.data<T>(),
                               ptr(weight), mean.data<T>(), rstd.data<T>(), rows, channels, blocks, stream);
      });
    });
    Tensors grads{dx};
    if (has_weight_) grads.push_back(dweight);
    if (has_bias_) grads.push_back(dbias);
    return grads;
  }

  // Mean, variance, normalise, scale and shift: about 8 per element; a
  // replay normalises with the saved mean and rstd (forward() above), and
  // scales and shifts: about 4.
  OpTraits traits() const override {
    return {.flops = 8 * numel(record().output_shape), .replay_flops = 4 * numel(record().output_shape),
            .replay_reuses_side_results = true};
  }

 private:
  double eps_;
  bool has_weight_, has_bias_;
  void discard_side_results() override {
    mean_ = Tensor();
    rstd_ = Tensor();
  }
  Tensor mean_, rstd_;  // (rows): from forward to save(); not kept otherwise
};

void check_eps(double eps, std::string_view op) {
  REMAT_CHECK(eps > 0, "{}: eps must be > 0, got {}", op, eps);
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_eps(eps, "layer_norm");
  Tensors inputs{x};
  if (weight.defined()) inputs.push_back(weight);
  if (bias.defined()) inputs.push_back(bias);
  return apply_op(std::make_shared<LayerNormNode>(eps, weight.defined(), bias.defined()), inputs);
}

Tensor layer_norm_reference(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_eps(eps, "layer_norm_reference");
  const Tensor centered = x - mean(x, {-1}, true);
  const Tensor var = mean(centered * centered, {-1}, true);
  // 1 / sqrt(var + eps) as exp(-log(var + eps) / 2): there is no sqrt op.
  Tensor y = centered * exp(log(var + eps) * -0.5);
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

}  // namespace remat
