// rms_norm and rms_norm_reference; see rms_norm.h.
//
// The fused op keeps x, weight and each row's rstd = 1/rms for backward
// (not the output). rstd is a side result of forward(): the node holds it
// from forward() to save(), as LayerNormNode does its mean and rstd. A
// replay of a dropped output reads it back (rms_norm_apply) instead of
// summing the squares again: one pass over x, and the first forward's bits.
#include "ops/rms_norm.h"

#include "engine/autograd.h"
#include "engine/kernel_call.h"
#include "kernels/rms_norm.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace remat {
namespace {

class RmsNormNode final : public Node {
 public:
  RmsNormNode(double eps, bool has_weight) : eps_(eps), has_weight_(has_weight) {}
  std::string_view name() const override { return "rms_norm"; }

  // Inputs: x, then weight if given.
  Tensor forward(const Tensors& in) override {
    const Tensor x = dense(in[0]);
    REMAT_CHECK(x.dim() >= 1 && x.shape().back() > 0, "rms_norm: input {} has no channels to normalise", x.str());
    const int64_t channels = x.shape().back(), rows = x.numel() / channels;
    const Tensor weight = has_weight_ ? dense(in[1]) : Tensor();
    if (has_weight_) {
      REMAT_CHECK(weight.shape() == Shape{channels} && weight.dtype() == x.dtype(),
                  "rms_norm: weight {} does not fit input {} (expected {} ({}))", weight.str(), x.str(),
                  dtype_name(x.dtype()), channels);
    }
    Tensor out(x.shape(), x.dtype(), x.device());
    if (replaying()) {
      // The rstd saved the first time is this x's: one pass, the same bits.
      const Tensor rstd = saved(2);
      REMAT_CHECK(rstd.numel() == rows && rstd.dtype() == x.dtype(),
                  "rms_norm: replaying on input {} with a saved rstd {} that is not its rows'", x.str(), rstd.str());
      dispatch_floating(x.dtype(), name(), [&]<class T>() {
        run_kernel(out, name(), [&](auto stream) {
          const T* w = has_weight_ ? weight.data<T>() : nullptr;
          rms_norm_apply<T>(out.data<T>(), rstd.data<T>(), x.data<T>(), w, rows, channels, stream);
        });
      });
      return out;
    }
    rstd_ = Tensor({rows}, x.dtype(), x.device());
    dispatch_floating(x.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) {
        const T* w = has_weight_ ? weight.data<T>() : nullptr;
        rms_norm_forward<T>(out.data<T>(), rstd_.data<T>(), x.data<T>(), w, rows, channels, eps_, stream);
      });
    });
    return out;
  }

  void save(const Tensors& in, const Tensor&) override {
    save_value(in[0]);
    save_value(has_weight_ ? in[1] : Tensor());
    save_value(rstd_);
    rstd_ = Tensor();
  }

  // xhat = x rstd, y = xhat w, g = dy w, d rstd/dx_j = -rstd^3 x_j / C:
  // dx = rstd (g - xhat mean_C(g xhat)),  dw = sum_rows dy xhat
  Tensors backward(const Tensor& dout_any) override {
    const Tensor dout = dense(dout_any);
    const Tensor x = dense(saved(0));
    const Tensor weight = has_weight_ ? dense(saved(1)) : Tensor();
    const Tensor rstd = saved(2);
    const int64_t channels = x.shape().back(), rows = x.numel() / channels;
    Tensor dx, dweight;
    if (needs_input_grad(0)) dx = Tensor(x.shape(), x.dtype(), x.device());
    if (has_weight_ && needs_input_grad(1)) dweight = Tensor({channels}, x.dtype(), x.device());
    // The CPU kernel's blocks of rows size its scratch (dweight's partial
    // sums), which the op allocates so that it is counted; a rehearsal on
    // the meta device counts the same bytes.
    const int64_t blocks = kernels::cpu::rms_norm_backward_blocks(rows, channels);
    const int64_t scratch_size = dweight.defined() ? kernels::cpu::rms_norm_backward_scratch(blocks, channels) : 0;
    const Tensor scratch = scratch_size > 0 ? Tensor({scratch_size}, x.dtype(), x.device()) : Tensor();
    dispatch_floating(x.dtype(), name(), [&]<class T>() {
      run_kernel(dout, name(), [&](auto stream) {
        const auto ptr = [](const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
        rms_norm_backward<T>(ptr(dx), ptr(dweight), ptr(scratch), dout.data<T>(), x.data<T>(), ptr(weight),
                             rstd.data<T>(), rows, channels, blocks, stream);
      });
    });
    Tensors grads{dx};
    if (has_weight_) grads.push_back(dweight);
    return grads;
  }

  // Squares and their sum, then two products: about 4 per element; a
  // replay scales with the saved rstd (forward() above): 2.
  OpTraits traits() const override {
    return {.flops = 4 * numel(record().output_shape), .replay_flops = 2 * numel(record().output_shape),
            .replay_reuses_side_results = true};
  }

 private:
  void discard_side_results() override { rstd_ = Tensor(); }
  double eps_;
  bool has_weight_;
  Tensor rstd_;  // (rows): from forward to save(); not kept otherwise
};

void check_eps(double eps, std::string_view op) { REMAT_CHECK(eps > 0, "{}: eps must be > 0, got {}", op, eps); }

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  check_eps(eps, "rms_norm");
  Tensors inputs{x};
  if (weight.defined()) inputs.push_back(weight);
  return apply_op(std::make_shared<RmsNormNode>(eps, weight.defined()), inputs);
}

Tensor rms_norm_reference(const Tensor& x, const Tensor& weight, double eps) {
  check_eps(eps, "rms_norm_reference");
  // 1 / sqrt(mean(x^2) + eps) as exp(-log(...) / 2): there is no sqrt op.
  const Tensor rstd = exp(log(mean(x * x, {-1}, true) + eps) * -0.5);
  const Tensor y = x * rstd;
  return weight.defined() ? y * weight : y;
}

}  // namespace remat
