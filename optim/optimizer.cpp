// Optimizer base; see optimizer.h.
#include "optim/optimizer.h"

#include <unordered_map>

#include "engine/allocator.h"
#include "engine/error.h"

namespace remat::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  REMAT_CHECK(lr >= 0, "optimizer: learning rate must be non-negative, got {}", lr);
  std::unordered_map<const TensorImpl*, size_t> index_of;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    REMAT_CHECK(p.defined(), "optimizer: parameter {} is an undefined tensor", i);
    REMAT_CHECK(p.is_leaf() && p.requires_grad(), "optimizer: parameter {} ({}) must be a leaf that requires grad", i,
                p.str());
    REMAT_CHECK(p.dtype() == DType::Float32 || p.dtype() == DType::Float64,
                "optimizer: parameter {} ({}) must be float32 or float64", i, p.str());
    REMAT_CHECK(p.is_contiguous(), "optimizer: parameter {} ({}) must be contiguous (it is updated as a dense array)",
                i, p.str());
    // A parameter listed twice would take two steps per step().
    const auto [it, inserted] = index_of.emplace(p.impl(), i);
    REMAT_CHECK(inserted, "optimizer: parameters {} and {} are the same tensor ({})", it->second, i, p.str());
  }
}

void Optimizer::set_lr(double lr) {
  REMAT_CHECK(lr >= 0, "optimizer: learning rate must be non-negative, got {}", lr);
  lr_ = lr;
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.set_grad(Tensor());
}

Tensor dense_grad_of(const Tensor& param, const char* who) {
  Tensor grad = param.grad();
  if (!grad.defined()) return grad;
  REMAT_CHECK(grad.shape() == param.shape() && grad.dtype() == param.dtype(),
              "{}: gradient {} does not match its parameter {}", who, grad.str(), param.str());
  if (!grad.is_contiguous()) {
    CategoryGuard category(MemoryCategory::Gradient);
    grad = contiguous_copy(grad);
    param.set_grad(grad);
  }
  return grad;
}

void Optimizer::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  REMAT_CHECK(state.empty(), "load_state_dict: this optimizer keeps no state, but {} tensors were given (first '{}')",
              state.size(), state.front().first);
}

}  // namespace remat::optim
