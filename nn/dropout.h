// Dropout module: ops/dropout.h in training mode, the identity in eval mode.
// Its random numbers come from the generator it is given (counter-based, so
// that a replayed node draws the same mask).
#pragma once

#include "engine/rng.h"
#include "nn/module.h"
#include "ops/dropout.h"

namespace remat::nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p, Generator& generator = default_generator()) : p_(p), generator_(&generator) {}

  std::string_view type_name() const override { return "Dropout"; }
  Tensor forward(const Tensor& x) override {
    const ModuleScope scope = name_scope();
    return dropout(x, p_, is_training(), *generator_);
  }
  double p() const { return p_; }

 private:
  double p_;
  Generator* generator_;
};

}  // namespace remat::nn
