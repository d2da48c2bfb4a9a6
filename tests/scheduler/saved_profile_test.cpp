// Plans from a saved profile (Checkpointer::plan_from): the first step
// planned and within the budget, the plan kept as the profile made it, a
// budget below its minimum refused before any step; and the minimum budget
// holding through the re-plans from warm and noisy times.
#include "scheduler/checkpointer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "scheduler/profile_json.h"
#include "tests/support/errors.h"
#include "tests/support/plan_workloads.h"
#include "tests/support/plans.h"

namespace remat::scheduler {
namespace {

using namespace plan_testing;

// Steps of `workload` under a checkpointer that planned `saved` before the
// first (Checkpointer::plan_from): each step's report and the last grads.
std::pair<std::vector<StepReport>, Grads> run_from(const Workload& workload, const PlanOptions& options,
                                                   const GraphProfile& saved, int steps) {
  Checkpointer checkpointer(options);
  checkpointer.plan_from(saved);
  return steps_under(checkpointer, workload, steps);
}

// With a saved profile (JSON, as `remat explain --save-profile` writes it)
// the first step is planned, not profiled: on GPT and the MLP, under cost
// chain and auto, at the minimum budget and halfway to keep-all's peak, every
// step from the first measures within the budget and as predicted, with
// the keep-all gradients. Without one, the first step runs under blocks.
TEST(Plan, ASavedProfileKeepsTheFirstStepWithinTheBudget) {
  for (const auto& [name, workload] : {std::pair{"gpt", gpt()}, std::pair{"mlp", mlp()}}) {
    const Grads expected = reference(workload);
    const Step all = run(workload, {.policy = "none"});
    const GraphProfile saved = profile_from_json(profile_to_json(all.graph));
    const int64_t minimum = minimum_budget(saved), top = all.report.measured_peak_bytes;
    ASSERT_LT(minimum, top) << name;
    for (const std::string policy : {"cost", "chain", "auto"}) {
      for (const int64_t budget : {minimum, (minimum + top) / 2}) {
        SCOPED_TRACE(fmt::format("{} {} budget {}", name, policy, budget));
        const auto [reports, grads] = run_from(workload, {.policy = policy, .budget = budget}, saved, 4);
        EXPECT_EQ(grads, expected);
        for (const StepReport& report : reports) {
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

// A plan made from a saved profile is that profile's plan on every step:
// never re-planned from the run's own times (which differ between runs and
// machines), so the same profile gives the same plan everywhere.
TEST(Plan, APlanFromASavedProfileStaysThatPlan) {
  const Step all = run(gpt(), {.policy = "none"});
  const GraphProfile saved = profile_from_json(profile_to_json(all.graph));
  for (const PlanOptions& options : {PlanOptions{.policy = "cost"},
                                     PlanOptions{.policy = "chain", .budget = minimum_budget(saved)},
                                     PlanOptions{.policy = "auto", .budget = minimum_budget(saved)}}) {
    SCOPED_TRACE(options.policy);
    const Plan expected = make_plan(saved, options);
    Checkpointer checkpointer(options);
    checkpointer.plan_from(saved);
    steps_under(checkpointer, gpt(), 4);
    ASSERT_NE(checkpointer.plan(), nullptr);
    EXPECT_EQ(checkpointer.plan()->tags, expected.tags);
    EXPECT_EQ(checkpointer.plans_made(), 1);
    // The profile planned from is the saved one, its times untouched by the
    // steps' (a warm re-plan would have put their medians in).
    ASSERT_NE(checkpointer.profile(), nullptr);
    ASSERT_EQ(checkpointer.profile()->size(), saved.size());
    for (int64_t v = 0; v < saved.size(); ++v) {
      EXPECT_EQ(checkpointer.profile()->nodes[v].forward_ms, saved.nodes[v].forward_ms) << "node " << v;
    }
  }
}

// A budget below the saved profile's minimum fails when checkpointing is
// enabled, before any step, naming the minimum.
TEST(Plan, ASavedProfileRefusesABudgetBelowItsMinimumBeforeTheFirstStep) {
  const Step all = run(mlp(), {.policy = "none"});
  const int64_t minimum = minimum_budget(all.graph);
  for (const std::string policy : {"cost", "chain", "auto"}) {
    Checkpointer checkpointer({.policy = policy, .budget = minimum - 1});
    const std::string message = testing::error_of([&] { checkpointer.plan_from(all.graph); });
    EXPECT_TRUE(testing::contains(message, fmt::format("at least {} bytes", minimum))) << message;
    EXPECT_EQ(checkpointer.cached_plans(), 0u);
  }
}

// A profile of another graph (a batch of 4's run on 2 rows, a GPT's run on
// an MLP) is refused at the rehearsal before the first step, or, in a loop
// that rehearses nothing, once the first step's graph is known: the error
// names both signatures and the first node that differs, and training
// never goes on unplanned. The profile's own graph passes, and a graph
// after it (an epoch's smaller last batch) is planned as before.
TEST(Plan, AProfileOfAnotherGraphIsRefusedAtTheFirstStep) {
  const GraphProfile saved = profile_from_json(profile_to_json(run(gpt(4), {.policy = "none"}).graph));
  // gpt(batch)'s step on a model and batch made outside the rehearsal (a
  // model's initialisation reads its weights: not on the meta device).
  nn::GPT model({.vocab_size = 17, .block_size = 16, .n_layer = 3, .n_head = 2, .n_embd = 32, .dropout = 0.1,
                 .seed = 6, .mlp = nn::MlpPath::Explicit});  // gpt()'s model
  const auto step_of = [&model](Checkpointer& checkpointer, int64_t batch) {
    Generator g(2);
    const Tensor ids = as_data([&] { return randint(17, {batch, 16}, g); });
    const Tensor targets = as_data([&] { return randint(17, {batch, 16}, g); });
    return [&checkpointer, &model, ids, targets] {
      Tensor loss;
      {
        const auto recording = checkpointer.record();
        loss = model.forward(ids, targets).loss;
      }
      loss.backward();
    };
  };
  {
    Checkpointer checkpointer({.policy = "cost"});
    checkpointer.plan_from(saved);
    const std::string message = testing::error_of([&] { checkpointer.rehearse(step_of(checkpointer, 2)); });
    const uint64_t other = run(gpt(2), {.policy = "none"}).graph.signature;
    EXPECT_TRUE(testing::contains(message, fmt::format("signature {:016x} and {} nodes", saved.signature,
                                                       saved.size()))) << message;
    EXPECT_TRUE(testing::contains(message, fmt::format("this step's {:016x}", other))) << message;
    // The first node of the batch's shape: (4, 16, ...) saved, (2, 16, ...) now.
    EXPECT_TRUE(testing::contains(message, "-> (4, 16")) << message;
    EXPECT_TRUE(testing::contains(message, "float32 in the profile, '")) << message;
    EXPECT_TRUE(testing::contains(message, "-> (2, 16")) << message;
  }
  {
    Checkpointer checkpointer({.policy = "cost"});
    checkpointer.plan_from(saved);
    const std::string message = testing::error_of([&] { steps_under(checkpointer, mlp(), 2); });
    EXPECT_TRUE(testing::contains(message, "the saved profile planned from is of another graph")) << message;
    EXPECT_TRUE(testing::contains(message, fmt::format("{:016x}", saved.signature))) << message;
    EXPECT_TRUE(testing::contains(message, "node 0 is")) << message;
  }
  Checkpointer checkpointer({.policy = "cost"});
  checkpointer.plan_from(saved);
  checkpointer.rehearse(step_of(checkpointer, 4));
  const auto [reports, grads] = steps_under(checkpointer, gpt(4), 2);
  EXPECT_FALSE(reports.front().profiling) << reports.front().str();
  steps_under(checkpointer, gpt(2), 2);  // a later graph of its own
  EXPECT_EQ(checkpointer.plans_made(), 2);
}

// The profile a run saves (Checkpointer::profile) is of the graph most of
// its steps ran, its full batches', when the run ends on an epoch's short
// last batch or on the step after one. It was the latest graph planned,
// which after that next step was the short batch's on some runs (under
// ctest -j2: which plan a step finds first depends on its times), and the
// next run then refused the saved profile at its first step.
TEST(Plan, TheProfileToSaveIsOfTheFullBatchesGraph) {
  const uint64_t usual = run(gpt(4), {.policy = "none"}).graph.signature;
  const uint64_t last_batch = run(gpt(2), {.policy = "none"}).graph.signature;
  Checkpointer checkpointer({.policy = "cost"});
  steps_under(checkpointer, gpt(4), 3);
  steps_under(checkpointer, gpt(2), 1);  // an epoch's last batch
  ASSERT_NE(checkpointer.profile(), nullptr);
  EXPECT_EQ(checkpointer.profile()->signature, usual) << "the short batch's " << last_batch;
  steps_under(checkpointer, gpt(4), 1);  // the next epoch's first: the short batch's graph is planned now
  EXPECT_EQ(checkpointer.cached_plans(), 2u);
  ASSERT_NE(checkpointer.profile(), nullptr);
  EXPECT_EQ(checkpointer.profile()->signature, usual) << "not the short batch's " << last_batch;
}

// The budget a plan reports as the graph's minimum holds over the steps
// that re-plan from warm times (before: the minimum followed each step's
// times, and a re-plan refused a budget the step before had met).
TEST(Plan, TheReportedMinimumBudgetHoldsThroughTheRePlans) {
  const Step all = run(gpt(), {.policy = "none"});
  ASSERT_TRUE(all.plan.has_value());
  const int64_t minimum = all.plan->minimum_budget_bytes;
  EXPECT_EQ(minimum, minimum_budget(all.graph));
  for (const std::string policy : {"cost", "chain", "auto"}) {
    SCOPED_TRACE(policy);
    Checkpointer checkpointer({.policy = policy, .budget = minimum});
    try {
      for (int i = 0; i < 5; ++i) {
        Tensor loss;
        {
          const auto recording = checkpointer.record();
          loss = gpt()().first;
        }
        loss.backward();
        const StepReport report = checkpointer.report();
        if (i > 0) {
          EXPECT_LE(report.measured_peak_bytes, minimum) << report.str();
          EXPECT_EQ(report.minimum_budget_bytes, minimum) << report.str();
        }
      }
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// Small GPTs as the independent check trained them (1-3 layers, 16-48
// channels): keep-all profiles.
std::vector<GraphProfile> small_gpt_profiles() {
  std::vector<GraphProfile> profiles;
  for (const auto& [layers, channels] : {std::pair{1, 16}, {1, 32}, {2, 16}, {2, 48}, {3, 32}}) {
    auto model = std::make_shared<nn::GPT>(nn::GPTConfig{.vocab_size = 23, .block_size = 16, .n_layer = layers,
                                                         .n_head = 2, .n_embd = channels, .dropout = 0.1, .seed = 9});
    Generator g(3);
    Profiling profiling;
    const Tensor ids = as_data([&] { return randint(23, {3, 16}, g); });
    const Tensor targets = as_data([&] { return randint(23, {3, 16}, g); });
    const Tensor loss = model->forward(ids, targets).loss;
    loss.backward();
    profiles.push_back(profile_graph(loss));
  }
  return profiles;
}

// On each, ten noisy clocks give cost, chain and auto one minimum budget
// (before: it followed the times), and a plan made at that budget on one
// clock is re-planned from the next clocks with it as the current plan,
// never refused and always within the budget.
TEST(Plan, OnSmallGptsTheMinimumAndTheRePlansDoNotFollowTheClock) {
  int graph = 0;
  for (const GraphProfile& profile : small_gpt_profiles()) {
    SCOPED_TRACE(fmt::format("gpt {}", graph++));
    const int64_t minimum = minimum_budget(profile);
    for (const std::string policy : {"cost", "chain", "auto"}) {
      try {
        std::optional<Plan> current;
        for (uint64_t k = 0; k < 10; ++k) {
          const GraphProfile noisy = testing::with_noisy_times(profile, 100 * graph + k);
          const std::string message =
              testing::error_of([&] { make_plan(noisy, {.policy = policy, .budget = minimum - 1}); });
          EXPECT_TRUE(testing::contains(message, fmt::format("at least {} bytes", minimum)))
              << policy << ", clock " << k << ": " << message;
          Plan next = make_plan(noisy, {.policy = policy, .budget = minimum}, current ? &current->tags : nullptr);
          EXPECT_LE(next.predicted.peak_bytes, minimum) << policy << ", clock " << k;
          current = std::move(next);
        }
      } catch (const Error& e) {
        ADD_FAILURE() << policy << ": " << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace remat::scheduler
