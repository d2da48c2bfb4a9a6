// Progress of a training run on stderr, as the Trainer reports its steps
// (TrainerCallbacks::on_step_end): on a terminal a bar redrawn in place
// (steps, percent, elapsed and remaining time, running loss, samples per
// second), elsewhere (a log file, a pipe) a plain line every few seconds.
// Rank 0 only: the Trainer calls its hooks there.
//
//   Progress progress(samples_per_step);
//   callbacks.on_step_end = [&](const StepStats& s) { progress.update(s.step, s.steps, s.mean_loss); };
//   ...
//   progress.finish();
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace remat::train {

// The bar for `step` of `steps` after `seconds`: "[#####.....]  120/705  17% 00:03<00:14 loss 0.5123 9120
// samples/s", `width` characters of bar.
std::string progress_line(int64_t step, int64_t steps, double seconds, double loss, double samples_per_step,
                          int width = 30);

class Progress {
 public:
  // `out` is written to; on a terminal (isatty) the bar is redrawn in place.
  explicit Progress(double samples_per_step, std::FILE* out = stderr);
  void update(int64_t step, int64_t steps, double loss);
  // The examples a step trains, once known (auto_find_batch_size's batch).
  void set_samples_per_step(double samples_per_step) { samples_per_step_ = samples_per_step; }
  // Ends the bar's line (on a terminal).
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  double samples_per_step_;
  std::FILE* out_;
  bool terminal_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_ = start_;
  bool drawn_ = false;
};

}  // namespace remat::train
