// AdamW; see adamw.h. The bias corrections are computed here in double, once
// per parameter and step; the kernel does the per-element work.
#include "optim/adamw.h"

#include <cmath>

#include "engine/allocator.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "kernels/cpu/optim.h"

namespace remat::optim {

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Optimizer(std::move(params), options.lr), options_(options), state_(this->params().size()) {
  REMAT_CHECK(options.beta1 >= 0 && options.beta1 < 1, "AdamW: beta1 must be in [0, 1), got {}", options.beta1);
  REMAT_CHECK(options.beta2 >= 0 && options.beta2 < 1, "AdamW: beta2 must be in [0, 1), got {}", options.beta2);
  REMAT_CHECK(options.eps >= 0, "AdamW: eps must be non-negative, got {}", options.eps);
  REMAT_CHECK(options.weight_decay >= 0, "AdamW: weight_decay must be non-negative, got {}", options.weight_decay);
}

void AdamW::step() {
  for (size_t i = 0; i < params().size(); ++i) {
    const Tensor grad = dense_grad_of(params()[i], "AdamW");
    if (!grad.defined()) continue;
    const Tensor& p = params()[i];
    State& state = state_[i];
    if (!state.exp_avg.defined()) {
      CategoryGuard category(MemoryCategory::OptimizerState);
      state.exp_avg = zeros(p.shape(), p.dtype(), p.device());
      state.exp_avg_sq = zeros(p.shape(), p.dtype(), p.device());
    }
    state.step += 1;
    const double t = static_cast<double>(state.step);
    kernels::cpu::AdamwHyper hyper;
    hyper.lr = lr();
    hyper.beta1 = options_.beta1;
    hyper.beta2 = options_.beta2;
    hyper.eps = options_.eps;
    hyper.weight_decay = options_.weight_decay;
    hyper.step_size = lr() / (1.0 - std::pow(options_.beta1, t));
    hyper.bias_correction2_sqrt = std::sqrt(1.0 - std::pow(options_.beta2, t));
    dispatch_floating(p.dtype(), "AdamW", [&]<class T>() {
      kernels::cpu::adamw_step<T>(p.data<T>(), state.exp_avg.data<T>(), state.exp_avg_sq.data<T>(), grad.data<T>(),
                                  p.numel(), hyper);
    });
    p.storage()->bump_version();
  }
}

}  // namespace remat::optim
