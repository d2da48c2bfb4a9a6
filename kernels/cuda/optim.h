// The CUDA twins of kernels/cpu/optim.h: fused SGD and AdamW, one thread an
// element, each element's update kernels/math.h's (the CPU's too); AdamW
// over many tensors in one launch; clip_grads with its norm on the GPU.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/args.h"
#include "kernels/cuda/runtime.h"
#include "kernels/multi_tensor.h"

namespace remat::kernels::cuda {

template <class T>
void sgd_step(T* param, T* momentum_buf, const T* grad, int64_t n, const SgdHyper& hyper, bool first, Stream stream);
template <class T>
void adamw_step(T* param, T* exp_avg, T* exp_avg_sq, const T* grad, int64_t n, const AdamwHyper& hyper, Stream stream);

// adamw_step on every tensor of the table (all on the stream's device), in
// one launch: the table goes to the GPU with one asynchronous copy, the
// host does not wait. Each element's update is adamw_step's, bit for bit.
template <class T>
void adamw_multi_step(const std::vector<AdamwTensor<T>>& tensors, Stream stream);

// kernels/cpu/optim.h's clip_grads, the same bits as the CUDA squared_norm
// of each gradient added on the host in order (the old per-gradient path):
// the squares, the norm and coef stay on the GPU (three launches whatever
// the number of gradients), the scale reads coef there, and the host waits
// once, for the norm it returns.
template <class T>
double clip_grads(const std::vector<GradTensor<T>>& grads, double max_norm, Stream stream);

}  // namespace remat::kernels::cuda
