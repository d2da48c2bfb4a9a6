// Conv1D: GPT-2's name for a fully connected layer that stores its weight as
// (in, out), y = x W + b. Kept so that parameter names and shapes match
// Hugging Face's GPT-2 files. Weight N(0, init_std), bias 0.
#pragma once

#include <cstdint>

#include "engine/dtype.h"
#include "engine/rng.h"
#include "nn/module.h"

namespace remat::nn {

class Conv1D : public Module {
 public:
  Conv1D(int64_t in_features, int64_t out_features, double init_std = 0.02, Generator& generator = default_generator(),
         DType dtype = DType::Float32);

  std::string_view type_name() const override { return "Conv1D"; }
  // x (..., in) -> (..., out)
  Tensor forward(const Tensor& x) override;
  const Tensor& weight() const { return weight_; }  // (in, out)
  const Tensor& bias() const { return bias_; }      // (out)

 private:
  Tensor weight_;
  Tensor bias_;
};

}  // namespace remat::nn
