// MLP: Linear layers with a ReLU between consecutive ones (none after the
// last), held as a Sequential registered under `layers`:
//
//   MLP mlp({784, 256, 256, 10});   // layers.0 Linear, layers.1 ReLU, layers.2 Linear, ...
//   mlp.named_parameters();         // layers.0.weight, layers.0.bias, layers.2.weight, ...
//
// The Fashion-MNIST model of train/ and workload W1.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/dtype.h"
#include "engine/rng.h"
#include "nn/sequential.h"

namespace remat::nn {

class MLP : public Module {
 public:
  // sizes: input width, hidden widths..., output width (at least two, all > 0).
  explicit MLP(std::vector<int64_t> sizes, Generator& generator = default_generator(), DType dtype = DType::Float32);

  std::string_view type_name() const override { return "MLP"; }
  // x (..., sizes.front()) -> (..., sizes.back())
  Tensor forward(const Tensor& x) override {
    const auto recording = record_forward();
    const ModuleScope scope = name_scope();
    return layers_->forward(x);
  }

  const std::vector<int64_t>& sizes() const { return sizes_; }
  const std::shared_ptr<Sequential>& layers() const { return layers_; }

 private:
  std::vector<int64_t> sizes_;
  std::shared_ptr<Sequential> layers_;
};

}  // namespace remat::nn
