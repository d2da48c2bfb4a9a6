// SGD: stochastic gradient descent with optional momentum, dampening,
// Nesterov momentum and L2 weight decay, exactly torch.optim.SGD:
//
//   g = grad + weight_decay * p
//   buf = g on the first step, then momentum * buf + (1 - dampening) * g
//   g = nesterov ? g + momentum * buf : buf      (when momentum != 0)
//   p -= lr * g
//
// The update loop is kernels/cpu/optim.h (sgd_step).
#pragma once

#include "optim/optimizer.h"

namespace remat::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);

  void step() override;
  const SGDOptions& options() const { return options_; }  // options().lr is the initial lr; see lr()
  // The momentum buffer of params()[i]; undefined before its first step or
  // when momentum == 0.
  const Tensor& momentum_buffer(size_t i) const { return momentum_buffers_.at(i); }

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_buffers_;  // one per parameter, same shape
};

}  // namespace remat::optim
