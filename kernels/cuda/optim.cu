// Fused optimizer updates on the GPU; see optim.h.
#include "kernels/cuda/optim.h"

#include "kernels/cuda/launch.cuh"
#include "kernels/math.h"

namespace remat::kernels::cuda {

template <class T>
void sgd_step(T* param, T* momentum_buf, const T* grad, int64_t n, const SgdHyper& hyper, bool first, Stream stream) {
  const T lr = static_cast<T>(hyper.lr), wd = static_cast<T>(hyper.weight_decay);
  const T momentum = static_cast<T>(hyper.momentum), keep = static_cast<T>(1.0 - hyper.dampening);
  const bool decay = hyper.weight_decay != 0, nesterov = hyper.nesterov;
  launch_elementwise(n, stream, [=] __device__(int64_t i) {
    sgd_update<T>(param[i], momentum_buf ? &momentum_buf[i] : nullptr, grad[i], lr, wd, decay, momentum, keep, nesterov,
                  first);
  });
}

template <class T>
void adamw_step(T* param, T* exp_avg, T* exp_avg_sq, const T* grad, int64_t n, const AdamwHyper& hyper, Stream stream) {
  const AdamwConstants<T> constants(hyper);
  launch_elementwise(n, stream, [=] __device__(int64_t i) {
    adamw_update<T>(param[i], exp_avg[i], exp_avg_sq[i], grad[i], constants);
  });
}

template void sgd_step<float>(float*, float*, const float*, int64_t, const SgdHyper&, bool, Stream);
template void sgd_step<double>(double*, double*, const double*, int64_t, const SgdHyper&, bool, Stream);
template void adamw_step<float>(float*, float*, float*, const float*, int64_t, const AdamwHyper&, Stream);
template void adamw_step<double>(double*, double*, double*, const double*, int64_t, const AdamwHyper&, Stream);

}  // namespace remat::kernels::cuda
