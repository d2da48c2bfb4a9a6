// Embedding; see embedding.h.
#include "nn/embedding.h"

#include "engine/allocator.h"
#include "engine/factory.h"
#include "ops/embedding.h"

namespace remat::nn {

Embedding::Embedding(int64_t num, int64_t dim, double init_std, Generator& generator, DType dtype) {
  REMAT_CHECK(num > 0 && dim > 0, "Embedding: sizes must be positive, got ({}, {})", num, dim);
  CategoryGuard category(MemoryCategory::Parameter);
  weight_ = register_parameter("weight", normal({num, dim}, 0.0, init_std, dtype, generator));
}

Tensor Embedding::forward(const Tensor& ids) {
  const ModuleScope scope = name_scope();
  return embedding(weight_, ids);
}

}  // namespace remat::nn
