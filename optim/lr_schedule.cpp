// Learning-rate schedules; see lr_schedule.h.
//
// The warm-up is step / warmup_steps rather than (step + 1) / warmup_steps so
// that the numbers match Hugging Face's schedules exactly (the first step runs
// at lr 0). Both decays share the warm-up and the tail; only the shape of the
// decay differs, given as a function of progress p in [0, 1).
#include "optim/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "engine/error.h"

namespace remat::optim {
namespace {

void check(int64_t step, const ScheduleOptions& o, std::string_view who) {
  REMAT_CHECK(o.warmup_steps >= 0, "{}: warmup_steps must be non-negative, got {}", who, o.warmup_steps);
  REMAT_CHECK(o.total_steps > 0, "{}: total_steps must be positive, got {}", who, o.total_steps);
  REMAT_CHECK(o.total_steps >= o.warmup_steps, "{}: total_steps ({}) must be at least warmup_steps ({})", who,
              o.total_steps, o.warmup_steps);
  REMAT_CHECK(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1, "{}: min_lr_ratio must be in [0, 1], got {}", who,
              o.min_lr_ratio);
  REMAT_CHECK(step >= 0, "{}: step must be non-negative, got {}", who, step);
}

// decay(p) falls from 1 at p = 0 towards 0 at p = 1.
template <class Decay>
double warmup_then(int64_t step, const ScheduleOptions& o, std::string_view who, Decay decay) {
  check(step, o, who);
  if (step < o.warmup_steps) return static_cast<double>(step) / static_cast<double>(o.warmup_steps);
  if (step >= o.total_steps) return o.min_lr_ratio;
  const double p = static_cast<double>(step - o.warmup_steps) / static_cast<double>(o.total_steps - o.warmup_steps);
  return o.min_lr_ratio + (1 - o.min_lr_ratio) * decay(p);
}

}  // namespace

double warmup_cosine(int64_t step, const ScheduleOptions& options) {
  return warmup_then(step, options, "warmup_cosine",
                     [](double p) { return 0.5 * (1 + std::cos(std::numbers::pi * p)); });
}

double warmup_linear(int64_t step, const ScheduleOptions& options) {
  return warmup_then(step, options, "warmup_linear", [](double p) { return 1 - p; });
}

double warmup_constant(int64_t step, const ScheduleOptions& options) {
  check(step, options, "warmup_constant");
  return step < options.warmup_steps ? static_cast<double>(step) / static_cast<double>(options.warmup_steps) : 1.0;
}

std::string_view schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::WarmupCosine: return "warmup_cosine";
    case ScheduleKind::WarmupLinear: return "warmup_linear";
    case ScheduleKind::WarmupConstant: return "warmup_constant";
  }
  return "?";
}

double schedule_factor(ScheduleKind kind, int64_t step, const ScheduleOptions& options) {
  switch (kind) {
    case ScheduleKind::WarmupCosine: return warmup_cosine(step, options);
    case ScheduleKind::WarmupLinear: return warmup_linear(step, options);
    case ScheduleKind::WarmupConstant: return warmup_constant(step, options);
  }
  REMAT_FAIL("schedule_factor: unknown schedule kind {}", static_cast<int>(kind));
}

LRScheduler::LRScheduler(Optimizer& optimizer, ScheduleKind kind, ScheduleOptions options)
    : optimizer_(optimizer), kind_(kind), options_(options), base_lr_(optimizer.lr()) {
  apply();  // throws on bad options before the optimizer is touched
}

void LRScheduler::step() {
  ++step_;
  apply();
}

void LRScheduler::apply() {
  last_lr_ = base_lr_ * schedule_factor(kind_, step_, options_);
  optimizer_.set_lr(last_lr_);
}

}  // namespace remat::optim
