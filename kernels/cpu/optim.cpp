// Fused optimizer updates; see optim.h.
//
// Each update is one loop over the elements, split across threads in the
// chunks of in_chunks (parallel.h), fixed by n, like the elementwise kernels
// of unary.cpp. The order of the operations follows PyTorch's single-tensor
// implementations step by step, so that a float64 run agrees with the
// formulas to rounding. The update of
// one element is kernels/math.h's, shared with the CUDA kernels.
#include "kernels/cpu/optim.h"

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/unary.h"
#include "kernels/math.h"

namespace remat::kernels::cpu {
namespace {

// Runs body(i) for i in [0, n), in the chunks of in_chunks (parallel.h):
// the same bits at any thread count. Each chunk calls a copy of body of
// its own, so that the captured pointers stay in registers and the loop
// vectorises (through the shared one GCC reloaded them after every store,
// and SGD's update ran scalar).
template <class Body>
inline void elementwise(int64_t n, Body body) {
  in_chunks(n, [&body](int64_t begin, int64_t end) {
    const Body local = body;
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) local(i);
  });
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
      sgd_update<T>(param[i], static_cast<T*>(nullptr), grad[i], lr, wd, decay, momentum, keep, false, first);
    });
    return;
  }
  const bool nesterov = hyper.nesterov;
  elementwise(n, [=](int64_t i) {
    sgd_update<T>(param[i], &momentum_buf[i], grad[i], lr, wd, decay, momentum, keep, nesterov, first);
  });
}

template <class T>
void adamw_step(T* param, T* exp_avg, T* exp_avg_sq, const T* grad, int64_t n, const AdamwHyper& hyper, Host) {
  const AdamwConstants<T> constants(hyper);
  elementwise(n, [=](int64_t i) { adamw_update<T>(param[i], exp_avg[i], exp_avg_sq[i], grad[i], constants); });
}

template <class T>
void adamw_multi_step(const std::vector<AdamwTensor<T>>& tensors, Host) {
  for (const AdamwTensor<T>& t : tensors) {
    const AdamwConstants<T> constants = t.constants;
    T* param = t.param;
    T* exp_avg = t.exp_avg;
    T* exp_avg_sq = t.exp_avg_sq;
    const T* grad = t.grad;
    elementwise(t.n, [=](int64_t i) { adamw_update<T>(param[i], exp_avg[i], exp_avg_sq[i], grad[i], constants); });
  }
}

template <class T>
double clip_grads(const std::vector<GradTensor<T>>& grads, double max_norm, Host) {
  double squares = 0;
  for (const GradTensor<T>& g : grads) squares += squared_norm<T>(g.data, g.n);
  const double norm = std::sqrt(squares);
  const double coef = max_norm / (norm + 1e-6);
  // PyTorch multiplies by min(coef, 1) unconditionally; multiplying by 1 is a
  // no-op, and a NaN norm still reaches the gradients, as there.
  if (coef < 1.0 || std::isnan(coef)) {
    for (const GradTensor<T>& g : grads) scale<T>(g.data, g.data, static_cast<T>(coef), g.n);
  }
  return norm;
}

#define REMAT_INSTANTIATE_OPTIM(T)                                                  \
  template void sgd_step<T>(T*, T*, const T*, int64_t, const SgdHyper&, bool, Host);      \
  template void adamw_step<T>(T*, T*, T*, const T*, int64_t, const AdamwHyper&, Host);    \
  template void adamw_multi_step<T>(const std::vector<AdamwTensor<T>>&, Host);            \
  template double clip_grads<T>(const std::vector<GradTensor<T>>&, double, Host);
REMAT_INSTANTIATE_OPTIM(float)
REMAT_INSTANTIATE_OPTIM(double)
#undef REMAT_INSTANTIATE_OPTIM

}  // namespace remat::kernels::cpu
