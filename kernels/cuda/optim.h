// The CUDA twins of kernels/cpu/optim.h: fused SGD and AdamW, one thread an
// element, each element's update kernels/math.h's (the CPU's too).
#pragma once

#include <cstdint>

#include "kernels/args.h"
#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

template <class T>
void sgd_step(T* param, T* momentum_buf, const T* grad, int64_t n, const SgdHyper& hyper, bool first, Stream stream);
template <class T>
void adamw_step(T* param, T* exp_avg, T* exp_avg_sq, const T* grad, int64_t n, const AdamwHyper& hyper, Stream stream);

}  // namespace remat::kernels::cuda
