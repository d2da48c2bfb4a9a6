// clip_grad_norm; see clip.h. The squares are summed in double over every
// gradient (squared_norm, a kernel), then each gradient is scaled in place.
#include "optim/clip.h"

#include <cmath>

#include "engine/error.h"
#include "engine/kernel_call.h"
#include "kernels/reduce.h"
#include "kernels/unary.h"
#include "optim/optimizer.h"

namespace remat::optim {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  REMAT_CHECK(max_norm >= 0, "clip_grad_norm: max_norm must be non-negative, got {}", max_norm);
  std::vector<Tensor> grads;
  double squares = 0;
  for (const Tensor& p : params) {
    REMAT_CHECK(p.defined(), "clip_grad_norm: a parameter is an undefined tensor");
    const Tensor grad = dense_grad_of(p, "clip_grad_norm");
    if (!grad.defined()) continue;
    dispatch_floating(grad.dtype(), "clip_grad_norm", [&]<class T>() {
      run_kernel(grad, "clip_grad_norm", [&](auto stream) { squares += squared_norm<T>(grad.data<T>(), grad.numel(), stream); });
    });
    grads.push_back(grad);
  }
  const double norm = std::sqrt(squares);
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
      grad.storage()->bump_version();
    }
  }
  return norm;
}

}  // namespace remat::optim
