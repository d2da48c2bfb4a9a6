// Learning-rate schedules: the factor that multiplies the base learning rate
// at each step, as pure functions of the step, and LRScheduler, which applies
// one to an Optimizer. The convention is PyTorch's LambdaLR with the factors
// of Hugging Face's get_{cosine,linear}_schedule_with_warmup:
//
//   step < warmup:          factor = step / warmup_steps            (0 at step 0)
//   warmup <= step < total: decay from 1 to min_lr_ratio over progress
//                           p = (step - warmup) / (total - warmup):
//                           cosine: min + (1 - min) * (1 + cos(pi p)) / 2
//                           linear: min + (1 - min) * (1 - p)
//   step >= total:          factor = min_lr_ratio
//
//   LRScheduler sched(opt, ScheduleKind::WarmupCosine, {.warmup_steps = 100, .total_steps = 1000});
//   for (...) { loss.backward(); opt.step(); opt.zero_grad(); sched.step(); }
//
// Called by train/ (the Trainer) and by anyone who drives an optimizer by hand.
#pragma once

#include <cstdint>
#include <string_view>

#include "optim/optimizer.h"

namespace remat::optim {

struct ScheduleOptions {
  int64_t warmup_steps = 0;    // >= 0
  int64_t total_steps = 1;     // > 0 and >= warmup_steps; the factor reaches min_lr_ratio here
  double min_lr_ratio = 0.0;   // in [0, 1]: the final lr as a fraction of the base lr
};

// The factor in [0, 1] at `step` (>= 0). Invalid options or a negative step
// throw remat::Error naming the values.
double warmup_cosine(int64_t step, const ScheduleOptions& options);
double warmup_linear(int64_t step, const ScheduleOptions& options);

// Warm-up then constant: 1 from warmup_steps on (min_lr_ratio unused);
// Hugging Face's constant_with_warmup, and its constant with no warm-up.
double warmup_constant(int64_t step, const ScheduleOptions& options);

enum class ScheduleKind { WarmupCosine, WarmupLinear, WarmupConstant };
// "warmup_cosine", "warmup_linear", "warmup_constant"
std::string_view schedule_name(ScheduleKind kind);
double schedule_factor(ScheduleKind kind, int64_t step, const ScheduleOptions& options);

// Drives optimizer.lr() along a schedule. base_lr is optimizer.lr() at
// construction. As in PyTorch, the constructor already applies step 0
// (lr = base_lr * factor(0), which is 0 with a warm-up), and each step()
// moves to the next step: call it after each optimizer.step().
// The optimizer must outlive the scheduler.
class LRScheduler {
 public:
  LRScheduler(Optimizer& optimizer, ScheduleKind kind, ScheduleOptions options);

  // Advances to the next step and sets optimizer.set_lr(base_lr * factor(step)).
  void step();

  double base_lr() const { return base_lr_; }
  // The lr last set on the optimizer.
  double last_lr() const { return last_lr_; }
  // The step whose factor is applied now: 0 after construction, +1 per step().
  int64_t current_step() const { return step_; }
  ScheduleKind kind() const { return kind_; }
  const ScheduleOptions& options() const { return options_; }

 private:
  void apply();

  Optimizer& optimizer_;
  ScheduleKind kind_;
  ScheduleOptions options_;
  double base_lr_;
  double last_lr_ = 0;
  int64_t step_ = 0;
};

}  // namespace remat::optim
