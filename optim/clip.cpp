// clip_grad_norm; see clip.h. The squares are summed in double over every
// gradient, in order, then each gradient is scaled in place: one kernel call
// (clip_grads) when the gradients share a device and dtype, on CUDA with the
// norm kept on the GPU until the end; else per gradient (squared_norm, scale).
#include "optim/clip.h"

#include <algorithm>
#include <cmath>

#include "engine/error.h"
#include "engine/kernel_call.h"
#include "kernels/optim.h"
#include "kernels/reduce.h"
#include "kernels/unary.h"
#include "optim/optimizer.h"

namespace remat::optim {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  REMAT_CHECK(max_norm >= 0, "clip_grad_norm: max_norm must be non-negative, got {}", max_norm);
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    REMAT_CHECK(p.defined(), "clip_grad_norm: a parameter is an undefined tensor");
    const Tensor grad = dense_grad_of(p, "clip_grad_norm");
    if (grad.defined()) grads.push_back(grad);
  }
  if (grads.empty()) return 0;
  // One launch of clip_grads has a row of blocks a gradient: at most 65535.
  const bool one_group = grads.size() <= 65535 && std::all_of(grads.begin(), grads.end(), [&](const Tensor& g) {
    return g.device() == grads.front().device() && g.dtype() == grads.front().dtype();
  });
  double norm = 0;
  if (one_group) {
    // One kernel call for every gradient: on CUDA the squares, the norm and
    // the coefficient stay on the GPU, and the host waits once.
    dispatch_floating(grads.front().dtype(), "clip_grad_norm", [&]<class T>() {
      run_kernel(grads.front(), "clip_grad_norm", [&](auto stream) {
        std::vector<kernels::GradTensor<T>> rows;
        rows.reserve(grads.size());
        for (const Tensor& grad : grads) rows.push_back({grad.data<T>(), grad.numel()});
        norm = clip_grads<T>(rows, max_norm, stream);
      });
    });
  } else {
    // Mixed devices or dtypes, or more gradients than one launch takes: each
    // gradient's sum of squares to the host.
    double squares = 0;
    for (const Tensor& grad : grads) {
      dispatch_floating(grad.dtype(), "clip_grad_norm", [&]<class T>() {
        run_kernel(grad, "clip_grad_norm", [&](auto stream) { squares += squared_norm<T>(grad.data<T>(), grad.numel(), stream); });
      });
    }
    norm = std::sqrt(squares);
    const double coef = max_norm / (norm + 1e-6);
    // PyTorch multiplies by min(coef, 1) unconditionally; multiplying by 1 is a
    // no-op, and a NaN norm still reaches the gradients, as there.
    if (coef < 1.0 || std::isnan(coef)) {
      for (const Tensor& grad : grads) {
        dispatch_floating(grad.dtype(), "clip_grad_norm", [&]<class T>() {
          run_kernel(grad, "clip_grad_norm", [&](auto stream) {
            scale<T>(grad.data<T>(), grad.data<T>(), static_cast<T>(coef), grad.numel(), stream);
          });
        });
      }
    }
  }
  // The kernels scaled the gradients exactly when this holds (the same double
  // arithmetic on the host and on the GPU).
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0 || std::isnan(coef)) {
    for (const Tensor& grad : grads) grad.storage()->bump_version();
  }
  return norm;
}

}  // namespace remat::optim
