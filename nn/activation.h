// Activation modules: parameterless wrappers of the elementwise ops of
// ops/unary.h, so that they can sit in a Sequential. Header only; the math
// and its derivative live in ops/unary.cpp.
#pragma once

#include "nn/module.h"
#include "ops/unary.h"

namespace remat::nn {

// max(x, 0), elementwise.
class ReLU : public Module {
 public:
  std::string_view type_name() const override { return "ReLU"; }
  Tensor forward(const Tensor& x) override {
    const ModuleScope scope = name_scope();
    return relu(x);
  }
};

}  // namespace remat::nn
