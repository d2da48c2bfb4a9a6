// LayerNorm over the last axis, like torch.nn.LayerNorm(dim, eps):
// `weight` (dim) = 1 and `bias` (dim) = 0 at start. The fused kernels live in
// ops/layer_norm.h.
#pragma once

#include <cstdint>

#include "engine/dtype.h"
#include "nn/module.h"

namespace remat::nn {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, DType dtype = DType::Float32);

  std::string_view type_name() const override { return "LayerNorm"; }
  Tensor forward(const Tensor& x) override;
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }

 private:
  double eps_;
  Tensor weight_;
  Tensor bias_;
};

}  // namespace remat::nn
