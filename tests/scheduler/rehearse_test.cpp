// Checkpointer::rehearse: a step planned before it runs, from a rehearsal
// on the meta device. The rehearsal's profile holds the real step's bytes;
// from the first real step on, every step stays within the budget, as the
// simulator predicts, with the gradients (dropout masks included) of a twin
// model that never checkpoints; a budget below the minimum is refused before
// any step and changes nothing.
#include "scheduler/checkpointer.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "engine/allocator.h"
#include "nn/gpt.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "tests/support/errors.h"

namespace remat::scheduler {
namespace {

using Grads = std::vector<std::vector<float>>;

// A model and its batch, made once: steps run forward and backward on them,
// so that a rehearsal and the real steps see the same tensors.
struct TinyModel {
  std::shared_ptr<nn::Module> module;
  std::function<Tensor()> loss;
};

TinyModel tiny_gpt() {
  auto model = std::make_shared<nn::GPT>(nn::GPTConfig{.vocab_size = 17, .block_size = 16, .n_layer = 3, .n_head = 2,
                                                       .n_embd = 32, .dropout = 0.1, .seed = 6});
  Generator g(2);
  CategoryGuard data(MemoryCategory::Data);
  const Tensor ids = randint(17, {4, 16}, g), targets = randint(17, {4, 16}, g);
  return {model, [=] { return model->forward(ids, targets).loss; }};
}

TinyModel tiny_mlp() {
  Generator g(3);
  auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{64, 128, 128, 128, 10}, g);
  CategoryGuard data(MemoryCategory::Data);
  const Tensor x = normal({32, 64}, 0.0, 1.0, DType::Float32, g);
  const Tensor targets = randint(10, {32}, g);
  return {model, [=] { return cross_entropy(model->forward(x), targets); }};
}

// One training step's forward (recorded) and backward; the gradients.
Grads step(Checkpointer* checkpointer, const TinyModel& model) {
  for (const Tensor& p : model.module->parameters()) p.set_grad(Tensor());
  Tensor loss;
  {
    const auto recording = checkpointer ? checkpointer->record() : nullptr;
    loss = model.loss();
  }
  loss.backward();
  Grads grads;
  for (const Tensor& p : model.module->parameters()) grads.push_back(p.grad().to_vector<float>());
  return grads;
}

void rehearse(Checkpointer& checkpointer, const TinyModel& model) {
  checkpointer.rehearse([&] {
    Tensor loss;
    {
      const auto recording = checkpointer.record();
      loss = model.loss();
    }
    loss.backward();
  });
}

// What the planner reads of a graph, times aside.
void expect_same_bytes(const GraphProfile& rehearsed, const GraphProfile& real) {
  EXPECT_EQ(rehearsed.signature, real.signature);
  ASSERT_EQ(rehearsed.size(), real.size());
  EXPECT_EQ(rehearsed.leaves, real.leaves);
  ASSERT_EQ(rehearsed.outside_inputs.size(), real.outside_inputs.size());
  for (size_t i = 0; i < real.outside_inputs.size(); ++i) {
    EXPECT_EQ(rehearsed.outside_inputs[i].bytes, real.outside_inputs[i].bytes);
    EXPECT_EQ(rehearsed.outside_inputs[i].made_at, real.outside_inputs[i].made_at);
    EXPECT_EQ(rehearsed.outside_inputs[i].released_at, real.outside_inputs[i].released_at);
  }
  for (size_t v = 0; v < real.nodes.size(); ++v) {
    const NodeProfile &a = rehearsed.nodes[v], &b = real.nodes[v];
    SCOPED_TRACE(fmt::format("node {} {}", v, b.op));
    EXPECT_EQ(a.op, b.op);
    EXPECT_EQ(a.recorded_index, b.recorded_index);
    EXPECT_EQ(a.inputs, b.inputs);
    EXPECT_EQ(a.outside, b.outside);
    EXPECT_EQ(a.output_bytes, b.output_bytes);
    EXPECT_EQ(a.view_of, b.view_of);
    EXPECT_EQ(a.forward_peak_bytes, b.forward_peak_bytes);
    EXPECT_EQ(a.saved, b.saved);
    EXPECT_EQ(a.side_bytes, b.side_bytes);
    EXPECT_EQ(a.released_at, b.released_at);
    EXPECT_EQ(a.backward_ran, b.backward_ran);
    EXPECT_EQ(a.backward_peak_bytes, b.backward_peak_bytes);
    EXPECT_EQ(a.released_early, b.released_early);
    EXPECT_EQ(a.backward_late_peak_bytes, b.backward_late_peak_bytes);
    EXPECT_EQ(a.grad_bytes, b.grad_bytes);
    EXPECT_EQ(a.tag, b.tag);
  }
}

TEST(Rehearse, RecordsTheBytesOfTheRealStep) {
  for (const auto& [name, make] : {std::pair{"gpt", &tiny_gpt}, std::pair{"mlp", &tiny_mlp}}) {
    for (const std::string policy : {"none", "blocks"}) {
      SCOPED_TRACE(fmt::format("{} {}", name, policy));
      const TinyModel model = make();
      Checkpointer real({.policy = policy});
      step(&real, model);
      (void)real.record();  // settles the step: its graph is planned
      Checkpointer rehearsed({.policy = policy});
      rehearse(rehearsed, model);
      ASSERT_NE(real.profile(), nullptr);
      ASSERT_NE(rehearsed.profile(), nullptr);
      expect_same_bytes(*rehearsed.profile(), *real.profile());
      EXPECT_EQ(rehearsed.profile()->total_forward_ms(), 0.0);  // none was measured
    }
  }
}

TEST(Rehearse, KeepsEveryStepFromTheFirstWithinTheBudget) {
  for (const auto& [name, make] : {std::pair{"gpt", &tiny_gpt}, std::pair{"mlp", &tiny_mlp}}) {
    Checkpointer keep_all({.policy = "none"});
    const TinyModel probe = make();
    step(&keep_all, probe);
    const int64_t top = keep_all.report().measured_peak_bytes;
    (void)keep_all.record();
    const int64_t minimum = minimum_budget(*keep_all.profile());
    ASSERT_LT(minimum, top) << name;
    for (const std::string policy : {"cost", "chain", "auto"}) {
      for (const int64_t budget : {minimum, (minimum + top) / 2}) {
        SCOPED_TRACE(fmt::format("{} {} budget {}", name, policy, budget));
        // Twins of the same seeds: dropout masks move on with every
        // forward, so the plain twin steps alongside.
        const TinyModel plain = make(), checkpointed = make();
        Checkpointer checkpointer({.policy = policy, .budget = budget});
        rehearse(checkpointer, checkpointed);
        EXPECT_EQ(checkpointer.plans_made(), 1);
        for (int i = 0; i < 4; ++i) {
          // The report first: its peak counts what is allocated until it is
          // taken, and the plain twin's step must not be in it.
          const Grads grads = step(&checkpointer, checkpointed);
          const StepReport report = checkpointer.report();
          EXPECT_EQ(grads, step(nullptr, plain)) << "step " << i + 1;
          EXPECT_EQ(report.step, i + 1);
          EXPECT_FALSE(report.profiling) << report.str();
          EXPECT_LE(report.measured_peak_bytes, budget) << report.str();
          ASSERT_TRUE(report.predicted_peak_bytes.has_value()) << report.str();
          EXPECT_EQ(report.measured_peak_bytes, *report.predicted_peak_bytes) << report.str();
          EXPECT_EQ(report.minimum_budget_bytes, minimum) << report.str();
        }
      }
    }
  }
}

TEST(Rehearse, RefusesABudgetBelowTheMinimumBeforeAnyStepAndChangesNothing) {
  Checkpointer keep_all({.policy = "none"});
  const TinyModel probe = tiny_mlp();
  step(&keep_all, probe);
  (void)keep_all.record();
  const int64_t minimum = minimum_budget(*keep_all.profile());

  const TinyModel model = tiny_mlp(), twin = tiny_mlp();
  Checkpointer checkpointer({.policy = "cost", .budget = minimum - 1});
  const int64_t cpu_before = cpu_allocator().stats().live_transient;
  const std::string message = testing::error_of([&] { rehearse(checkpointer, model); });
  EXPECT_TRUE(testing::contains(message, fmt::format("at least {} bytes", minimum))) << message;
  EXPECT_EQ(cpu_allocator().stats().live_transient, cpu_before);
  EXPECT_EQ(checkpointer.cached_plans(), 0u);
  for (const Tensor& p : model.module->parameters()) EXPECT_FALSE(p.grad().defined());
  // The next step is the first, a profiling one, and trains as the twin does.
  const Grads grads = step(&checkpointer, model);
  EXPECT_EQ(grads, step(nullptr, twin));
  EXPECT_EQ(checkpointer.report().step, 1);
  EXPECT_TRUE(checkpointer.report().profiling);
}

TEST(Rehearse, AStepWithoutRecordOrBackwardIsAnError) {
  const TinyModel model = tiny_mlp();
  Checkpointer checkpointer({.policy = "cost", .budget = 1 << 30});
  const std::string unrecorded = testing::error_of([&] { checkpointer.rehearse([&] { model.loss().backward(); }); });
  EXPECT_TRUE(testing::contains(unrecorded, "recorded no forward")) << unrecorded;
  const std::string no_backward = testing::error_of([&] {
    checkpointer.rehearse([&] {
      const auto recording = checkpointer.record();
      (void)model.loss();
    });
  });
  EXPECT_TRUE(testing::contains(no_backward, "ran no backward")) << no_backward;
  EXPECT_EQ(checkpointer.cached_plans(), 0u);
}

}  // namespace
}  // namespace remat::scheduler
