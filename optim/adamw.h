// AdamW: Adam with decoupled weight decay (Loshchilov & Hutter 2019),
// exactly torch.optim.AdamW (amsgrad off). Per parameter, at step t:
//
//   p *= 1 - lr * weight_decay
//   m = beta1 * m + (1 - beta1) * g;      v = beta2 * v + (1 - beta2) * g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// m and v start at zero and live under MemoryCategory::OptimizerState; t
// counts the steps that parameter took (one with no grad does not count).
// The update loop is kernels/cpu/optim.h (adamw_multi_step: one launch for
// every parameter of a device and dtype on CUDA).
#pragma once

#include <cstdint>

#include "optim/optimizer.h"

namespace remat::optim {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});

  void step() override;
  const AdamWOptions& options() const { return options_; }  // options().lr is the initial lr; see lr()

  // State of params()[i]: undefined / 0 before its first step.
  const Tensor& exp_avg(size_t i) const { return state_.at(i).exp_avg; }
  const Tensor& exp_avg_sq(size_t i) const { return state_.at(i).exp_avg_sq; }
  int64_t step_count(size_t i) const { return state_.at(i).step; }

  // "{i}.exp_avg", "{i}.exp_avg_sq" (the parameter's shape) and "{i}.step"
  // (int64 (1)) for every parameter that has taken a step.
  std::vector<std::pair<std::string, Tensor>> state_dict() const override;
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) override;

 private:
  struct State {
    Tensor exp_avg;     // m, same shape as the parameter
    Tensor exp_avg_sq;  // v, same shape as the parameter
    int64_t step = 0;
  };
  AdamWOptions options_;
  std::vector<State> state_;
};

}  // namespace remat::optim
