// Progress of a training run on stderr, as the Trainer reports its steps
// (TrainerCallbacks::on_step_end): on a terminal a bar redrawn in place
// (steps, percent, elapsed and remaining time, running loss, samples per
// second), elsewhere (a log file, a pipe) a plain line every few seconds.
// Rank 0 only: the Trainer calls its hooks there.
//
//   Progress progress;
//   callbacks.on_step_end = [&](const StepStats& s) { progress.update(s.step, s.steps, s.mean_loss, s.samples); };
//   ...
//   progress.finish();
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace remat::train {

// The bar for `step` of `steps`, `seconds` into a run that took `steps_run`
// of them (fewer than `step` when it resumed) and trained `samples`
// examples in them: "[#####.....]  120/705  17% 00:03<00:14 loss 0.5123 9120
// samples/s", `width` characters of bar. The rate and the time left come
// from this run's steps and examples alone.
std::string progress_line(int64_t step, int64_t steps, int64_t steps_run, double seconds, double loss, double samples,
                          int width = 30);

class Progress {
 public:
  // `out` is written to; on a terminal (isatty) the bar is redrawn in place.
  explicit Progress(std::FILE* out = stderr);
  // After optimizer step `step` of `steps`, which trained `samples`
  // examples (every rank's: an epoch's short last batch counts its rows).
  void update(int64_t step, int64_t steps, double loss, double samples);
  // Ends the bar's line (on a terminal).
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  double samples_ = 0;        // trained since the first update
  int64_t steps_run_ = 0;     // updates so far
  std::FILE* out_;
  bool terminal_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_ = start_;
  bool drawn_ = false;
};

}  // namespace remat::train
