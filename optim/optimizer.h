// Optimizer: the base of SGD and AdamW, over a list of parameter tensors
// (usually Module::parameters()), like torch.optim.Optimizer with one group.
//
//   SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});
//   loss.backward(); opt.step(); opt.zero_grad();
//
// step() updates each parameter's data in place, on the raw buffers, with no
// autograd; a parameter whose grad is undefined is skipped. State (momentum,
// moments) is allocated under MemoryCategory::OptimizerState.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace remat::optim {

class Optimizer {
 public:
  // Every param must be a contiguous float leaf that requires grad, listed once.
  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  double lr() const { return lr_; }
  void set_lr(double lr);  // for LR schedules; lr >= 0
  const std::vector<Tensor>& params() const { return params_; }

  // Sets every parameter's grad to undefined, freeing its Gradient bytes
  // (as PyTorch's zero_grad(set_to_none=True)).
  void zero_grad();
  virtual void step() = 0;

  // The optimizer's state as named tensors ("3.exp_avg": the first moment of
  // params()[3]), for training checkpoints; empty before the first step.
  virtual std::vector<std::pair<std::string, Tensor>> state_dict() const { return {}; }
  // Restores what state_dict() gave, all or nothing: every name must belong
  // to this optimizer and fit its parameter's shape and dtype, else an
  // error naming it, and no state changes.
  virtual void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);

 private:
  std::vector<Tensor> params_;
  double lr_;
};

// The gradient of `param`, checked (same shape and dtype) and replaced by a
// contiguous copy (category Gradient) when it is a strided view, so that
// kernels can read it as a dense array. Undefined if param has no grad.
// `who` names the caller in messages.
Tensor dense_grad_of(const Tensor& param, const char* who);

}  // namespace remat::optim
