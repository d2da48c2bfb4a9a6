// Fused optimizer updates; see optim.h.
//
// Each update is one loop over the elements, split across threads above
// kParallelGrain like the elementwise kernels of unary.cpp. The order of the
// operations follows PyTorch's single-tensor implementations step by step,
// so that a float64 run agrees with the formulas to rounding.
#include "kernels/cpu/optim.h"

#include <cmath>

#include "kernels/cpu/parallel.h"

namespace remat::kernels::cpu {
namespace {

// Runs body(i) for i in [0, n), on every thread when n is large enough.
template <class Body>
inline void elementwise(int64_t n, Body body) {
#pragma omp parallel for simd schedule(static) if (n >= 2 * kParallelGrain)
  for (int64_t i = 0; i < n; ++i) body(i);
}

}  // namespace

template <class T>
void sgd_step(T* param, T* momentum_buf, const T* grad, int64_t n, const SgdHyper& hyper, bool first, Host) {
  const T lr = static_cast<T>(hyper.lr);
  const T wd = static_cast<T>(hyper.weight_decay);
  const T momentum = static_cast<T>(hyper.momentum);
  const T keep = static_cast<T>(1.0 - hyper.dampening);
  const bool decay = hyper.weight_decay != 0;
  // The branches below test values that are the same for every element, so
  // each loop body is straight-line code.
  if (momentum_buf == nullptr) {
    elementwise(n, [=](int64_t i) {
      const T g = decay ? grad[i] + wd * param[i] : grad[i];
      param[i] = param[i] - lr * g;
    });
    return;
  }
  const bool nesterov = hyper.nesterov;
  elementwise(n, [=](int64_t i) {
    const T g = decay ? grad[i] + wd * param[i] : grad[i];
    // The first buffer is the gradient itself, with no dampening (as in PyTorch).
    const T buf = first ? g : momentum_buf[i] * momentum + keep * g;
    momentum_buf[i] = buf;
    const T direction = nesterov ? g + momentum * buf : buf;
    param[i] = param[i] - lr * direction;
  });
}

template <class T>
void adamw_step(T* param, T* exp_avg, T* exp_avg_sq, const T* grad, int64_t n, const AdamwHyper& hyper, Host) {
  const T decay = static_cast<T>(1.0 - hyper.lr * hyper.weight_decay);
  const T beta1 = static_cast<T>(hyper.beta1), beta2 = static_cast<T>(hyper.beta2);
  const T one_minus_beta1 = static_cast<T>(1.0 - hyper.beta1), one_minus_beta2 = static_cast<T>(1.0 - hyper.beta2);
  const T eps = static_cast<T>(hyper.eps);
  const T step_size = static_cast<T>(hyper.step_size);
  const T bc2_sqrt = static_cast<T>(hyper.bias_correction2_sqrt);
  elementwise(n, [=](int64_t i) {
    const T g = grad[i];
    const T m = beta1 * exp_avg[i] + one_minus_beta1 * g;
    const T v = beta2 * exp_avg_sq[i] + one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    // Decoupled weight decay acts on the parameter before the Adam step.
    const T p = param[i] * decay;
    param[i] = p - step_size * m / (std::sqrt(v) / bc2_sqrt + eps);
  });
}

#define REMAT_INSTANTIATE_OPTIM(T)                                                  \
  template void sgd_step<T>(T*, T*, const T*, int64_t, const SgdHyper&, bool, Host);      \
  template void adamw_step<T>(T*, T*, T*, const T*, int64_t, const AdamwHyper&, Host);
REMAT_INSTANTIATE_OPTIM(float)
REMAT_INSTANTIATE_OPTIM(double)
#undef REMAT_INSTANTIATE_OPTIM

}  // namespace remat::kernels::cpu
