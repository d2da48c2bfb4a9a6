// Embedding: a (num, dim) table whose rows are picked by int64 ids, like
// torch.nn.Embedding. Weight `weight` initialised N(0, init_std) (PyTorch's
// default is 1; GPT uses 0.02). The op and its scatter-add backward live in
// ops/embedding.h.
#pragma once

#include <cstdint>

#include "engine/dtype.h"
#include "engine/rng.h"
#include "nn/module.h"

namespace remat::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, double init_std = 1.0, Generator& generator = default_generator(),
            DType dtype = DType::Float32);

  std::string_view type_name() const override { return "Embedding"; }
  // ids int64 (...) -> (..., dim)
  Tensor forward(const Tensor& ids) override;
  const Tensor& weight() const { return weight_; }

 private:
  Tensor weight_;
};

}  // namespace remat::nn
