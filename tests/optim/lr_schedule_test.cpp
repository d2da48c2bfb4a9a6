// LR schedules: warm-up and decay factors at hand-computed steps (both
// shapes, with and without a floor), option errors, and LRScheduler driving
// the lr of an SGD and through it the size of the updates.
#include "optim/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ops/ops.h"
#include "optim/sgd.h"
#include "tests/support/errors.h"

namespace remat::optim {
namespace {

using remat::testing::error_of;

// 10 warm-up steps, then 100 decay steps down to 0.1.
constexpr ScheduleOptions kOptions{.warmup_steps = 10, .total_steps = 110, .min_lr_ratio = 0.1};

TEST(LRSchedule, CosineAtHandPicks) {
  EXPECT_EQ(warmup_cosine(0, kOptions), 0.0);
  EXPECT_DOUBLE_EQ(warmup_cosine(5, kOptions), 0.5);  // warm-up midpoint
  EXPECT_DOUBLE_EQ(warmup_cosine(1, kOptions), 0.1);
  EXPECT_DOUBLE_EQ(warmup_cosine(10, kOptions), 1.0);  // end of warm-up
  // p = 1/4: cos(pi/4) = sqrt(2)/2, so 0.1 + 0.9 * (1 + sqrt(2)/2) / 2.
  EXPECT_DOUBLE_EQ(warmup_cosine(35, kOptions), 0.1 + 0.9 * (2 + std::sqrt(2.0)) / 4);
  EXPECT_DOUBLE_EQ(warmup_cosine(60, kOptions), 0.55);  // midpoint: (1 + min) / 2
  EXPECT_DOUBLE_EQ(warmup_cosine(110, kOptions), 0.1);  // end: min
  EXPECT_DOUBLE_EQ(warmup_cosine(111, kOptions), 0.1);  // constant after
  EXPECT_DOUBLE_EQ(warmup_cosine(100000, kOptions), 0.1);
}

TEST(LRSchedule, LinearAtHandPicks) {
  EXPECT_EQ(warmup_linear(0, kOptions), 0.0);
  EXPECT_DOUBLE_EQ(warmup_linear(5, kOptions), 0.5);
  EXPECT_DOUBLE_EQ(warmup_linear(10, kOptions), 1.0);
  EXPECT_DOUBLE_EQ(warmup_linear(35, kOptions), 0.775);  // 0.1 + 0.9 * 0.75
  EXPECT_DOUBLE_EQ(warmup_linear(60, kOptions), 0.55);
  EXPECT_DOUBLE_EQ(warmup_linear(109, kOptions), 0.109);  // 0.1 + 0.9 * 0.01
  EXPECT_DOUBLE_EQ(warmup_linear(110, kOptions), 0.1);
  EXPECT_DOUBLE_EQ(warmup_linear(500, kOptions), 0.1);
}

TEST(LRSchedule, ConstantAfterItsWarmUp) {
  const ScheduleOptions o{.warmup_steps = 4, .total_steps = 10, .min_lr_ratio = 0.5};
  EXPECT_DOUBLE_EQ(warmup_constant(0, o), 0.0);
  EXPECT_DOUBLE_EQ(warmup_constant(2, o), 0.5);
  EXPECT_DOUBLE_EQ(warmup_constant(4, o), 1.0);
  EXPECT_DOUBLE_EQ(warmup_constant(25, o), 1.0);  // past total_steps too: no floor, no decay
  EXPECT_DOUBLE_EQ(schedule_factor(ScheduleKind::WarmupConstant, 0, {.warmup_steps = 0}), 1.0);
}

TEST(LRSchedule, NoWarmupAndNoFloor) {
  const ScheduleOptions o{.warmup_steps = 0, .total_steps = 4, .min_lr_ratio = 0};
  EXPECT_EQ(warmup_cosine(0, o), 1.0);  // no warm-up: full lr at once
  EXPECT_DOUBLE_EQ(warmup_cosine(1, o), (2 + std::sqrt(2.0)) / 4);
  EXPECT_DOUBLE_EQ(warmup_cosine(2, o), 0.5);
  EXPECT_DOUBLE_EQ(warmup_cosine(3, o), (2 - std::sqrt(2.0)) / 4);
  EXPECT_EQ(warmup_cosine(4, o), 0.0);
  EXPECT_EQ(warmup_linear(0, o), 1.0);
  EXPECT_DOUBLE_EQ(warmup_linear(3, o), 0.25);
  EXPECT_EQ(warmup_linear(4, o), 0.0);
}

TEST(LRSchedule, WarmupAllTheWay) {
  // warmup == total: ramp up, then straight to the floor.
  const ScheduleOptions o{.warmup_steps = 4, .total_steps = 4, .min_lr_ratio = 0.2};
  EXPECT_DOUBLE_EQ(warmup_cosine(3, o), 0.75);
  EXPECT_DOUBLE_EQ(warmup_cosine(4, o), 0.2);
  EXPECT_DOUBLE_EQ(warmup_linear(3, o), 0.75);
  EXPECT_DOUBLE_EQ(warmup_linear(4, o), 0.2);
}

TEST(LRSchedule, FactorsStayInUnitInterval) {
  for (int64_t step = 0; step <= 120; ++step) {
    for (const ScheduleKind kind : {ScheduleKind::WarmupCosine, ScheduleKind::WarmupLinear}) {
      const double f = schedule_factor(kind, step, kOptions);
      EXPECT_GE(f, 0.0) << schedule_name(kind) << " step " << step;
      EXPECT_LE(f, 1.0) << schedule_name(kind) << " step " << step;
      if (step >= 10) {
        EXPECT_GE(f, 0.1) << schedule_name(kind) << " step " << step;
      }
    }
  }
}

TEST(LRSchedule, Errors) {
  const auto expect_error = [](const ScheduleOptions& o, int64_t step, const std::string& part) {
    const std::string message = error_of([&] { warmup_cosine(step, o); });
    EXPECT_NE(message.find(part), std::string::npos) << message;
    EXPECT_EQ(error_of([&] { warmup_linear(step, o); }).find("no error"), std::string::npos);
  };
  expect_error({.warmup_steps = 10, .total_steps = 5}, 0, "total_steps (5) must be at least warmup_steps (10)");
  expect_error({.warmup_steps = -1, .total_steps = 5}, 0, "warmup_steps must be non-negative, got -1");
  expect_error({.warmup_steps = 0, .total_steps = 0}, 0, "total_steps must be positive, got 0");
  expect_error({.warmup_steps = 0, .total_steps = 5, .min_lr_ratio = 1.5}, 0, "min_lr_ratio must be in [0, 1], got 1.5");
  expect_error(kOptions, -3, "step must be non-negative, got -3");
  EXPECT_NE(error_of([] { warmup_linear(0, {.warmup_steps = 3, .total_steps = 2}); }).find("warmup_linear"),
            std::string::npos);
}

TEST(LRScheduler, DrivesSgdLearningRate) {
  Tensor p = from_vector(std::vector<double>{1.0}, {1});
  p.requires_grad_();
  SGD sgd({p}, {.lr = 0.2});
  LRScheduler sched(sgd, ScheduleKind::WarmupLinear, {.warmup_steps = 2, .total_steps = 4, .min_lr_ratio = 0});
  EXPECT_EQ(sched.base_lr(), 0.2);
  EXPECT_EQ(sched.current_step(), 0);
  EXPECT_EQ(sgd.lr(), 0.0);  // step 0 of a warm-up, as PyTorch's LambdaLR applies at construction
  EXPECT_EQ(sched.last_lr(), 0.0);

  // Factors 0, 1/2, 1, 1/2, 0, 0 at steps 0..5; each optimizer step uses the current one.
  const std::vector<double> expected_lr{0.0, 0.1, 0.2, 0.1, 0.0, 0.0};
  double value = 1.0;
  for (size_t step = 0; step < expected_lr.size(); ++step) {
    EXPECT_DOUBLE_EQ(sgd.lr(), expected_lr[step]) << "step " << step;
    EXPECT_DOUBLE_EQ(sched.last_lr(), expected_lr[step]) << "step " << step;
    p.set_grad(from_vector(std::vector<double>{1.0}, {1}));
    sgd.step();
    value -= expected_lr[step];  // p -= lr * grad with grad 1
    EXPECT_DOUBLE_EQ(p.to_vector<double>()[0], value) << "step " << step;
    sched.step();
  }
  EXPECT_EQ(sched.current_step(), 6);
  EXPECT_DOUBLE_EQ(p.to_vector<double>()[0], 0.6);  // 1 - (0.1 + 0.2 + 0.1)
}

TEST(LRScheduler, CosineEndsAtFloorTimesBase) {
  Tensor p = from_vector(std::vector<float>{0}, {1});
  p.requires_grad_();
  SGD sgd({p}, {.lr = 1.0});
  LRScheduler sched(sgd, ScheduleKind::WarmupCosine, {.warmup_steps = 0, .total_steps = 2, .min_lr_ratio = 0.25});
  EXPECT_EQ(sgd.lr(), 1.0);
  sched.step();
  EXPECT_DOUBLE_EQ(sgd.lr(), 0.625);  // midpoint (1 + 0.25) / 2
  sched.step();
  EXPECT_DOUBLE_EQ(sgd.lr(), 0.25);
  sched.step();
  EXPECT_DOUBLE_EQ(sgd.lr(), 0.25);
}

TEST(LRScheduler, BadOptionsLeaveTheOptimizerAlone) {
  Tensor p = from_vector(std::vector<float>{0}, {1});
  p.requires_grad_();
  SGD sgd({p}, {.lr = 0.3});
  const std::string message = error_of([&] {
    LRScheduler sched(sgd, ScheduleKind::WarmupCosine, {.warmup_steps = 5, .total_steps = 3});
  });
  EXPECT_NE(message.find("total_steps (3) must be at least warmup_steps (5)"), std::string::npos) << message;
  EXPECT_EQ(sgd.lr(), 0.3);
}

}  // namespace
}  // namespace remat::optim
