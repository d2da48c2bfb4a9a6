// Accelerator: the training loop's view of distribution and gradient
// accumulation, after Hugging Face Accelerate (docs/design.md, "The user's API").
//
//   Accelerator accelerator({.gradient_accumulation_steps = 2});
//   accelerator.prepare(model);                        // parameters from rank 0
//   auto loader = accelerator.prepare(data::DataLoader(train, {...}));  // this rank's shard
//   auto optimizer = accelerator.prepare(adamw);       // steps only when gradients sync
//   for (const data::Batch& batch : loader.epoch(epoch)) {
//     auto window = accelerator.accumulate(model);
//     accelerator.backward(loss_of(batch));
//     optimizer.step(); optimizer.zero_grad();
//   }
//
// Micro-batches form windows of gradient_accumulation_steps. backward()
// scales each micro-batch's loss by its share of the window's samples (1/k
// when all batches are full), so that a window's summed gradient is the
// gradient of the mean loss over the window, as one k-times batch would give.
// On the window's last micro-batch sync_gradients() is true: backward()
// averages the gradients over the ranks (one bucketed allreduce), and the
// prepared optimizer and scheduler act only then. The last window of an
// epoch may hold fewer batches: it ends with the epoch and is weighted by its
// own samples. Epoch boundaries come from the prepared loader (or
// set_epoch_length); without one, every window has k micro-batches.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "comm/buckets.h"
#include "comm/communicator.h"
#include "comm/mpi.h"
#include "nn/module.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "data/data_loader.h"

namespace remat::train {

struct AcceleratorOptions {
  int64_t gradient_accumulation_steps = 1;  // >= 1
  int64_t bucket_bytes = comm::kDefaultBucketBytes;
  // Where the model trains: prepare(model) moves it there and a prepared
  // loader's batches arrive there, as Accelerate's device placement.
  Device device = Device::cpu();
  // Null: comm::world() (MPI when started by mpirun, else a single
  // process); on a GPU under mpirun, NCCL bootstrapped over MPI, one rank
  // per GPU (each rank's device is then the GPU of its local rank).
  std::shared_ptr<comm::Communicator> communicator;
};

class Accelerator;

// The optimizer as the loop sees it: step() and zero_grad() act only on the
// last micro-batch of a window.
class PreparedOptimizer {
 public:
  void step();
  void zero_grad();
  optim::Optimizer& inner() const { return optimizer_; }

 private:
  friend class Accelerator;
  PreparedOptimizer(optim::Optimizer& optimizer, const Accelerator& accelerator)
      : optimizer_(optimizer), accelerator_(accelerator) {}
  optim::Optimizer& optimizer_;
  const Accelerator& accelerator_;
};

// The LR scheduler likewise: one schedule step per optimizer step.
class PreparedScheduler {
 public:
  void step();
  optim::LRScheduler& inner() const { return scheduler_; }

 private:
  friend class Accelerator;
  PreparedScheduler(optim::LRScheduler& scheduler, const Accelerator& accelerator)
      : scheduler_(scheduler), accelerator_(accelerator) {}
  optim::LRScheduler& scheduler_;
  const Accelerator& accelerator_;
};

class Accelerator {
 public:
  class Window;

  explicit Accelerator(AcceleratorOptions options = {});

  int rank() const { return comm_->rank(); }
  int num_processes() const { return comm_->world_size(); }
  bool is_main_process() const { return rank() == 0; }
  comm::Communicator& communicator() const { return *comm_; }
  // For values in host memory (settings checked across ranks, a stop
  // flag): the communicator itself, or with NCCL (device buffers only) the
  // MPI communicator it was bootstrapped over.
  comm::Communicator& host_communicator() const { return bootstrap_ ? *bootstrap_ : *comm_; }
  Device device() const { return device_; }
  const AcceleratorOptions& options() const { return options_; }

  // Prints on rank 0 only (a line per message, to stdout, flushed).
  template <class... Args>
  void print(fmt::format_string<Args...> format, Args&&... args) const {
    if (!is_main_process()) return;
    fmt::print(format, std::forward<Args>(args)...);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }

  // The model whose gradients backward() synchronises, moved to device();
  // its parameters are broadcast from rank 0, so every rank starts from the
  // same model.
  void prepare(nn::Module& model);
  // The same loader over this rank's shard (its seed is kept: ranks must
  // share it). The first loader prepared is the training loader: its batch
  // count and batch sizes define epochs and windows; later ones (an
  // evaluation loader) are only sharded.
  data::DataLoader prepare(const data::DataLoader& loader);
  PreparedOptimizer prepare(optim::Optimizer& optimizer) const { return {optimizer, *this}; }
  PreparedScheduler prepare(optim::LRScheduler& scheduler) const { return {scheduler, *this}; }

  // Epoch length in micro-batches (what the prepared loader set), for loops
  // that stop an epoch early: at most the loader's batch count; 0: unknown,
  // every window is full and its micro-batches weigh the same.
  void set_epoch_length(int64_t batches);

  // Opens the next micro-batch: call once per batch, before its forward.
  [[nodiscard]] Window accumulate(nn::Module& model);
  // loss.backward() with the loss scaled by this micro-batch's share of its
  // window; on a window's last micro-batch, then averages the gradients over
  // the ranks (unless LocalSGD turned that off).
  void backward(const Tensor& loss);
  // True on the last micro-batch of a window (kept after its guard closes,
  // until the next accumulate(); true before the first).
  bool sync_gradients() const { return sync_gradients_; }
  // Optimizer steps so far: windows completed.
  int64_t optimizer_steps() const { return optimizer_steps_; }
  // Continues a saved run: `optimizer_steps` windows done, and the next
  // micro-batch the `batch`-th of its epoch (the first of a window).
  void resume_at(int64_t optimizer_steps, int64_t batch);

  // LocalSGD turns gradient averaging off while it runs.
  void set_gradient_allreduce(bool enabled) { gradient_allreduce_ = enabled; }
  bool gradient_allreduce() const { return gradient_allreduce_; }

  // Every rank's `values` concatenated along axis 0, in rank order (for
  // metrics: each rank's (correct, count) becomes everyone's).
  Tensor gather(const Tensor& values) const;

 private:
  void begin_micro_batch(nn::Module& model);

  AcceleratorOptions options_;
  Device device_;
  std::unique_ptr<comm::Mpi> bootstrap_;  // NCCL's, when the Accelerator made it
  std::shared_ptr<comm::Communicator> comm_;
  nn::Module* model_ = nullptr;
  // Epoch geometry from the first prepared loader: its batches' rows.
  std::vector<int64_t> batch_rows_;
  int64_t epoch_length_ = 0;
  // The open micro-batch.
  int64_t position_ = 0;       // index of the next micro-batch in its epoch
  double loss_scale_ = 1;
  bool window_open_ = false;
  bool sync_gradients_ = true;
  bool gradient_allreduce_ = true;
  int64_t optimizer_steps_ = 0;
};

// The guard of one micro-batch (Accelerator::accumulate); closing it ends
// the micro-batch.
class Accelerator::Window {
 public:
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  bool sync_gradients() const { return accelerator_.sync_gradients(); }

 private:
  friend class Accelerator;
  explicit Window(Accelerator& accelerator) : accelerator_(accelerator) {}
  Accelerator& accelerator_;
};

}  // namespace remat::train

namespace remat {
using train::Accelerator;
using train::AcceleratorOptions;
}  // namespace remat
