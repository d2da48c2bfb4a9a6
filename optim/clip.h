// clip_grad_norm: rescales gradients so that their total L2 norm is at most
// max_norm, exactly torch.nn.utils.clip_grad_norm_ (norm_type 2):
//
//   norm = sqrt(sum over params of |grad|^2)
//   grad *= max_norm / (norm + 1e-6)      when that factor is below 1
//
// Parameters without a grad are skipped. Called by train/ before step().
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace remat::optim {

// Returns the total norm before clipping. max_norm must be non-negative.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace remat::optim
