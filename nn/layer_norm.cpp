// LayerNorm; see layer_norm.h.
#include "nn/layer_norm.h"

#include "engine/allocator.h"
#include "engine/factory.h"
#include "ops/layer_norm.h"

namespace remat::nn {

LayerNorm::LayerNorm(int64_t dim, double eps, DType dtype) : eps_(eps) {
  REMAT_CHECK(dim > 0 && eps > 0, "LayerNorm: need dim > 0 and eps > 0, got {} and {}", dim, eps);
  CategoryGuard category(MemoryCategory::Parameter);
  weight_ = register_parameter("weight", ones({dim}, dtype));
  bias_ = register_parameter("bias", zeros({dim}, dtype));
}

Tensor LayerNorm::forward(const Tensor& x) {
  const ModuleScope scope = name_scope();
  return layer_norm(x, weight_, bias_, eps_);
}

}  // namespace remat::nn
