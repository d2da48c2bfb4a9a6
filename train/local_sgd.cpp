// LocalSGD; see local_sgd.h.
#include "train/local_sgd.h"

#include <exception>

namespace remat::train {

LocalSGD::LocalSGD(Accelerator& accelerator, nn::Module& model, LocalSGDOptions options)
    : accelerator_(accelerator),
      options_(options),
      active_(options.enabled && accelerator.num_processes() > 1),
      uncaught_at_entry_(std::uncaught_exceptions()),
      allreduce_before_(accelerator.gradient_allreduce()) {
  REMAT_CHECK(options_.local_sgd_steps >= 1, "LocalSGD: local_sgd_steps must be >= 1, got {}",
              options_.local_sgd_steps);
  if (!active_) return;
  averager_.emplace(accelerator.communicator(), model.parameters(),
                    comm::AveragingOptions{.bucket_bytes = accelerator.options().bucket_bytes,
                                           .diloco = options_.diloco});
  accelerator_.set_gradient_allreduce(false);
}

LocalSGD::~LocalSGD() noexcept(false) {
  if (!active_) return;
  accelerator_.set_gradient_allreduce(allreduce_before_);
  if (abandoned_ || std::uncaught_exceptions() > uncaught_at_entry_) return;
  finish();
}

void LocalSGD::finish() {
  if (!active_ || steps_ == synced_at_) return;
  averager_->sync();
  synced_at_ = steps_;
}

void LocalSGD::step() {
  if (!accelerator_.sync_gradients()) return;  // inside a window: no optimizer step was taken
  ++steps_;
  if (active_ && steps_ % options_.local_sgd_steps == 0) {
    averager_->sync();
    synced_at_ = steps_;
  }
}

void LocalSGD::set_steps(int64_t steps) {
  REMAT_CHECK(steps >= 0, "LocalSGD: steps must be >= 0, got {}", steps);
  steps_ = steps;
  synced_at_ = steps;
}

std::vector<std::pair<std::string, Tensor>> LocalSGD::state_dict() const {
  return averager_ ? averager_->state_dict() : std::vector<std::pair<std::string, Tensor>>{};
}

void LocalSGD::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  if (averager_) {
    averager_->load_state_dict(state);
  } else {
    REMAT_CHECK(state.empty(), "LocalSGD: {} state tensors given to an inactive guard", state.size());
  }
}

}  // namespace remat::train
