// Linear: y = x W^T + b, the fully connected layer, like torch.nn.Linear.
// Parameters `weight` (out, in) and `bias` (out), both initialised
// U(-1/sqrt(in), 1/sqrt(in)) as PyTorch does by default. The math and its
// backward live in ops/matmul.h (linear()); this file only holds the weights.
#pragma once

#include <cstdint>

#include "engine/dtype.h"
#include "engine/rng.h"
#include "nn/module.h"

namespace remat::nn {

class Linear : public Module {
 public:
  // dtype float64 is for gradient checks; training uses float32.
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator& generator = default_generator(),
         DType dtype = DType::Float32);

  std::string_view type_name() const override { return "Linear"; }
  // x (..., in) -> (..., out)
  Tensor forward(const Tensor& x) override;

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  const Tensor& weight() const { return weight_; }  // (out, in)
  const Tensor& bias() const { return bias_; }      // (out), or undefined without bias

 private:
  int64_t in_features_;
  int64_t out_features_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace remat::nn
