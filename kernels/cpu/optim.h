// Fused optimizer updates on dense arrays of n elements: one pass reads the
// gradient and updates the parameter and its state in place, with the exact
// arithmetic of torch.optim.SGD and torch.optim.AdamW (single-tensor path).
// No Tensor and no autograd here; optim/sgd.cpp and optim/adamw.cpp call
// these through dispatch_floating.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/args.h"
#include "kernels/cpu/host.h"
#include "kernels/multi_tensor.h"

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

// adamw_step on every tensor of the table, each with its own constants: on
// the CPU one tensor after the other (the same bits as adamw_step); its
// CUDA twin updates them all in one launch.
template <class T>
void adamw_multi_step(const std::vector<AdamwTensor<T>>& tensors, Host = {});

// torch.nn.utils.clip_grad_norm_ over the gradients of the table, all of
// one device and dtype; returns the total norm before clipping:
//   squares = 0;  for each grad in order: squares += squared_norm(grad)
//   norm = sqrt(squares);  coef = max_norm / (norm + 1e-6)
//   if coef < 1 or coef is NaN: every grad *= T(coef)
// (a NaN norm reaches the gradients, as in PyTorch). The CUDA twin keeps
// the squares, the norm and coef on the GPU and copies the norm back once.
template <class T>
double clip_grads(const std::vector<GradTensor<T>>& grads, double max_norm, Host = {});

}  // namespace remat::kernels::cpu
