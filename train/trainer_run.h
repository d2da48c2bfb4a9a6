// What trainer.cpp, trainer_evaluate.cpp and trainer_checkpoints.cpp
// share and no caller of the Trainer needs: the state of one train() call
// (Trainer::Run), the clock it is timed by, and where checkpoints lie.
// Included by those three files only.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "train/local_sgd.h"
#include "train/trainer.h"

namespace remat::train {
namespace trainer_internal {

using Clock = std::chrono::steady_clock;
constexpr const char* kCheckpointFile = "checkpoint.safetensors";

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// output_dir/checkpoint-STEP: where the checkpoint of `step` is saved.
inline std::string checkpoint_folder(const std::string& output_dir, int64_t step) {
  return (std::filesystem::path(output_dir) / ("checkpoint-" + std::to_string(step))).string();
}

// output_dir's checkpoint-STEP folders, oldest first.
std::vector<std::filesystem::path> checkpoints_in(const std::string& output_dir);

}  // namespace trainer_internal

struct Trainer::Run {
  std::unique_ptr<optim::AdamW> adamw;
  std::unique_ptr<optim::LRScheduler> schedule;
  std::unique_ptr<LocalSGD> local_sgd;
  std::optional<data::DataLoader> loader;
  int64_t batches = 0;          // per epoch, this rank
  int64_t steps_per_epoch = 0;  // optimizer steps
  int64_t total_steps = 0;
  int64_t next_epoch = 0, next_batch = 0;  // where the loop continues
  // The loop's state, from set-up to the end.
  std::vector<Tensor> params;
  std::string resumed_from;  // "" when the run starts afresh
  bool saving = false;       // checkpoints are written
  int64_t eval_every = 1, first_step = 0;
  trainer_internal::Clock::time_point start;
  double logged_loss = 0, window_loss = 0, run_loss = 0, grad_norm = 0;
  // The steps' losses summed since the run began (a resumed run starts from
  // its checkpoint's), and how many: train_loss, the whole run's mean.
  double loss_sum = 0;
  int64_t loss_steps = 0;
  int64_t logged_steps = 0, window_batches = 0, step_peak = 0;
  // Rows trained on this rank: in the window of micro-batches, and in this
  // train() call (an epoch's last, smaller batch counted as it is).
  int64_t window_samples = 0, samples = 0;
  std::optional<double> bad_loss;  // of the window's micro-batches, the first non-finite
  std::optional<double> metric;    // of the step's evaluation, the one that picks the best checkpoint
  bool stop = false;
  int stop_signal = 0;  // the signal that stopped the run (train/interrupt.h), 0 if none
  // The epoch's own figures.
  double epoch_loss = 0;
  int64_t epoch_steps = 0, epoch_peak = 0;
  bool epoch_done = false;  // its last batch ran
};

}  // namespace remat::train
