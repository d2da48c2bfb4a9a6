// Linear; see linear.h.
//
// PyTorch initialises the weight with kaiming_uniform_(a = sqrt(5)), whose
// bound gain * sqrt(3 / fan_in) with gain = sqrt(2 / (1 + 5)) is exactly
// 1 / sqrt(fan_in), and the bias with U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
// Both are drawn here directly with that bound, weight first.
#include "nn/linear.h"

#include <cmath>

#include "engine/allocator.h"
#include "engine/factory.h"
#include "ops/matmul.h"

namespace remat::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Generator& generator, DType dtype)
    : in_features_(in_features), out_features_(out_features) {
  REMAT_CHECK(in_features >= 0 && out_features >= 0, "Linear: sizes must be non-negative, got in {} and out {}",
              in_features, out_features);
  REMAT_CHECK(dtype == DType::Float32 || dtype == DType::Float64, "Linear: dtype must be float32 or float64, got {}",
              dtype_name(dtype));
  const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
  // Allocated as parameters from the start, so no activation bytes come and go.
  CategoryGuard category(MemoryCategory::Parameter);
  weight_ = register_parameter("weight", uniform({out_features, in_features}, -bound, bound, dtype, generator));
  if (bias) bias_ = register_parameter("bias", uniform({out_features}, -bound, bound, dtype, generator));
}

Tensor Linear::forward(const Tensor& x) {
  REMAT_CHECK(x.defined() && x.dim() >= 1 && x.shape().back() == in_features_,
              "Linear({}, {}): input {} must end in an axis of size {}", in_features_, out_features_, x.str(),
              in_features_);
  REMAT_CHECK(x.dtype() == weight_.dtype(), "Linear({}, {}): input {} has dtype {} but the weight is {}", in_features_,
              out_features_, x.str(), dtype_name(x.dtype()), dtype_name(weight_.dtype()));
  const ModuleScope scope = name_scope();
  return linear(x, weight_, bias_);
}

}  // namespace remat::nn
