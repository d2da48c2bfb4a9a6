// SGD; see sgd.h.
#include "optim/sgd.h"

#include "engine/allocator.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "engine/kernel_call.h"
#include "kernels/optim.h"

namespace remat::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), options.lr), options_(options), momentum_buffers_(this->params().size()) {
  REMAT_CHECK(options.momentum >= 0, "SGD: momentum must be non-negative, got {}", options.momentum);
  REMAT_CHECK(options.weight_decay >= 0, "SGD: weight_decay must be non-negative, got {}", options.weight_decay);
  REMAT_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
              "SGD: nesterov momentum needs momentum > 0 and dampening 0, got momentum {} and dampening {}",
              options.momentum, options.dampening);
}

void SGD::step() {
  const kernels::SgdHyper hyper{lr(), options_.momentum, options_.dampening, options_.weight_decay,
                                options_.nesterov};
  for (size_t i = 0; i < params().size(); ++i) {
    const Tensor grad = dense_grad_of(params()[i], "SGD");
    if (!grad.defined()) continue;
    const Tensor& p = params()[i];
    Tensor& buf = momentum_buffers_[i];
    const bool first = options_.momentum != 0 && !buf.defined();
    if (buf.defined() && buf.device() != p.device()) {  // the model moved (Module::to)
      CategoryGuard category(MemoryCategory::OptimizerState);
      buf = to(buf, p.device());
    }
    if (first) {
      CategoryGuard category(MemoryCategory::OptimizerState);
      buf = Tensor(p.shape(), p.dtype(), p.device());  // written by the kernel before it is read
    }
    dispatch_floating(p.dtype(), "SGD", [&]<class T>() {
      run_kernel(p, "SGD", [&](auto stream) {
        sgd_step<T>(p.data<T>(), buf.defined() ? buf.data<T>() : nullptr, grad.data<T>(), p.numel(), hyper, first,
                    stream);
      });
    });
    p.storage()->bump_version();
  }
}

}  // namespace remat::optim
