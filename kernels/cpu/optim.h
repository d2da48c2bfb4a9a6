// Fused optimizer updates on dense arrays of n elements: one pass reads the
// gradient and updates the parameter and its state in place, with the exact
// arithmetic of torch.optim.SGD and torch.optim.AdamW (single-tensor path).
// No Tensor and no autograd here; optim/sgd.cpp and optim/adamw.cpp call
// these through dispatch_floating.
#pragma once

#include <cstdint>

#include "kernels/args.h"
#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

using kernels::SgdHyper;
using kernels::AdamwHyper;

// One SGD step on param (n), reading grad (n):
//   g = grad + weight_decay * param
//   buf = first ? g : momentum * buf + (1 - dampening) * g   (when momentum != 0)
//   g = nesterov ? g + momentum * buf : buf                   (when momentum != 0)
//   param -= lr * g
// momentum_buf (n) is null exactly when momentum == 0; `first` means it holds
// no value yet (it is written, not read).
template <class T>
void sgd_step(T* param, T* momentum_buf, const T* grad, int64_t n, const SgdHyper& hyper, bool first, Host = {});


// One AdamW step on param (n), reading grad (n), with state exp_avg (n) and
// exp_avg_sq (n):
//   param *= 1 - lr * weight_decay
//   m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g^2
//   param -= step_size * m / (sqrt(v) / bias_correction2_sqrt + eps)
template <class T>
void adamw_step(T* param, T* exp_avg, T* exp_avg_sq, const T* grad, int64_t n, const AdamwHyper& hyper, Host = {});

}  // namespace remat::kernels::cpu
