// Conv1D; see conv1d.h.
#include "nn/conv1d.h"

#include "engine/allocator.h"
#include "engine/factory.h"
#include "ops/matmul.h"

namespace remat::nn {

Conv1D::Conv1D(int64_t in_features, int64_t out_features, double init_std, Generator& generator, DType dtype) {
  REMAT_CHECK(in_features > 0 && out_features > 0, "Conv1D: sizes must be positive, got in {} and out {}", in_features,
              out_features);
  CategoryGuard category(MemoryCategory::Parameter);
  weight_ = register_parameter("weight", normal({in_features, out_features}, 0.0, init_std, dtype, generator));
  bias_ = register_parameter("bias", zeros({out_features}, dtype));
}

Tensor Conv1D::forward(const Tensor& x) {
  const ModuleScope scope = name_scope();
  return affine(x, weight_, bias_);
}

}  // namespace remat::nn
