// MLP; see mlp.h. Layers are built in order, so the generator's draws (and
// hence the initial weights for a given seed) follow the layer order.
#include "nn/mlp.h"

#include <fmt/ranges.h>

#include "engine/error.h"
#include "nn/activation.h"
#include "nn/linear.h"

namespace remat::nn {

MLP::MLP(std::vector<int64_t> sizes, Generator& generator, DType dtype) : sizes_(std::move(sizes)) {
  REMAT_CHECK(sizes_.size() >= 2, "MLP: needs at least an input and an output size, got {} size(s)", sizes_.size());
  for (int64_t s : sizes_) REMAT_CHECK(s > 0, "MLP: sizes must be positive, got {} in [{}]", s, fmt::join(sizes_, ", "));
  layers_ = register_module("layers", std::make_shared<Sequential>());
  for (size_t i = 0; i + 1 < sizes_.size(); ++i) {
    if (i > 0) layers_->push_back(std::make_shared<ReLU>());
    layers_->push_back(std::make_shared<Linear>(sizes_[i], sizes_[i + 1], true, generator, dtype));
  }
}

}  // namespace remat::nn
