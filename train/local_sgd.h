// LocalSGD: a guard around a training loop in which each rank takes
// local_sgd_steps optimizer steps on its own, with no gradient traffic, and
// then all ranks average their parameters with one bucketed allreduce
// (comm::ModelAverager). Optionally DiLoCo: an outer Nesterov step on the
// averaged parameter change at each sync. After Hugging Face Accelerate's
// LocalSGD:
//
//   {
//     LocalSGD local_sgd(accelerator, model, {.local_sgd_steps = 8});
//     for (const data::Batch& batch : loader.epoch(epoch)) {
//       auto window = accelerator.accumulate(model);
//       accelerator.backward(loss_of(batch));
//       optimizer.step(); optimizer.zero_grad();
//       local_sgd.step();
//     }
//   }  // leaving the guard averages once more
//
// step() counts optimizer steps, never micro-batches: it counts only when the
// accelerator's window ended (sync_gradients()), so a window of gradient
// accumulation is never split by a sync. With enabled = false, or one
// process, the guard changes nothing and never communicates. The count is
// training state: steps() and set_steps() carry it through checkpoints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/averaging.h"
#include "nn/module.h"
#include "train/accelerator.h"

namespace remat::train {

struct LocalSGDOptions {
  int64_t local_sgd_steps = 8;  // H >= 1: optimizer steps between averages
  bool enabled = true;
  std::optional<comm::DiLoCoOptions> diloco;  // empty: plain averaging
};

class LocalSGD {
 public:
  LocalSGD(Accelerator& accelerator, nn::Module& model, LocalSGDOptions options = {});
  // Averages once more if any step was taken since the last average (not
  // while an exception unwinds: the peers may never get there), and gives
  // the accelerator's gradient averaging back as it was. A failed average throws (a
  // CommError), hence noexcept(false).
  ~LocalSGD() noexcept(false);
  LocalSGD(const LocalSGD&) = delete;
  LocalSGD& operator=(const LocalSGD&) = delete;

  // Call once per micro-batch, after the optimizer's step.
  void step();
  // The average that leaving the guard does, now (for a loop that measures
  // the common model before the guard ends); nothing if no step was taken
  // since the last average.
  void finish();
  // Leaves without that last average: for a caller whose loop failed in a
  // way the destructor cannot see (Python's `with`, left by an exception),
  // since the peers may never reach the average. Gradient averaging is
  // still given back when the guard ends.
  void abandon() { abandoned_ = true; }

  bool active() const { return active_; }
  int64_t steps() const { return steps_; }  // optimizer steps counted
  int64_t syncs() const { return averager_ ? averager_->syncs() : 0; }
  // For resuming: the count saved with a checkpoint (syncs then fall on the
  // same steps as in the run that was interrupted).
  void set_steps(int64_t steps);
  // DiLoCo's outer state, for checkpoints (empty for plain LocalSGD).
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  void load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state);

 private:
  Accelerator& accelerator_;
  LocalSGDOptions options_;
  bool active_;
  int64_t steps_ = 0;
  int64_t synced_at_ = 0;  // steps_ at the last average
  std::optional<comm::ModelAverager> averager_;
  int uncaught_at_entry_;
  bool allreduce_before_;  // the accelerator's gradient averaging, given back at the end
  bool abandoned_ = false;
};

}  // namespace remat::train

namespace remat {
using train::LocalSGD;
using train::LocalSGDOptions;
}  // namespace remat
