// Plans under every policy, through the Checkpointer, on an MLP and on a GPT
// with dropout: gradients bit-identical to keeping everything, the
// simulator's peak equal to the allocator's (within 2%), budgets honoured,
// errors that name the reachable minimum, a plan per graph signature.
// Plans from saved profiles and the re-plans: saved_profile_test.cpp.
#include "scheduler/checkpointer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include <cmath>
#include <functional>
#include <thread>

#include "engine/allocator.h"
#include "nn/gpt.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "scheduler/profile_json.h"
#include "tests/support/errors.h"
#include "tests/support/plan_workloads.h"
#include "tests/support/plans.h"

namespace remat::scheduler {
namespace {

using namespace plan_testing;

// On both MLP paths: the fused one (gelu_affine) is dropped and replayed
// as a compute-bound node whose backward makes GELU again.
TEST(Plan, EveryPolicyIsBitIdenticalOnGptWithDropoutAndPredictsItsPeak) {
  for (const nn::MlpPath mlp : {nn::MlpPath::Explicit, nn::MlpPath::Fused}) {
    SCOPED_TRACE(std::string(nn::mlp_path_name(mlp)) + " MLP");
    const Grads expected = reference(gpt(4, mlp));
    for (const std::string& policy : policy_names()) {
      if (policy == "dtr") continue;  // plans nothing (tests/scheduler/dtr_test.cpp)
      SCOPED_TRACE(policy);
      const Step step = run(gpt(4, mlp), testing::options_of(policy));
      EXPECT_EQ(step.grads, expected);
      EXPECT_FALSE(step.report.profiling);
      expect_prediction_holds(step);
      if (policy != "none" && policy != "chain" && policy != "milp") {  // they keep all without a budget
        EXPECT_GT(step.report.replayed_nodes, 0);
      }
    }
    // chain and milp within a budget halfway from the graph's minimum to
    // keep-all's peak, where they replay.
    const Step all = run(gpt(4, mlp), {.policy = "none"});
    const int64_t low = minimum_budget(all.graph), high = all.report.measured_peak_bytes;
    for (const std::string policy : {"chain", "milp"}) {
      SCOPED_TRACE(policy + " within a budget");
      const Step step = run(gpt(4, mlp), {.policy = policy, .budget = (low + high) / 2}, 3);
      EXPECT_EQ(step.grads, expected);
      expect_prediction_holds(step);
      EXPECT_LE(step.report.measured_peak_bytes, (low + high) / 2);
      EXPECT_GT(step.report.replayed_nodes, 0);
    }
  }
}

TEST(Plan, EveryPolicyIsBitIdenticalOnTheMlp) {
  const Grads expected = reference(mlp());
  for (const std::string& policy : policy_names()) {
    if (policy == "dtr") continue;  // plans nothing (tests/scheduler/dtr_test.cpp)
    if (testing::names_gpt_parts(policy)) continue;  // blocks or modules an MLP lacks (presets_test.cpp)
    SCOPED_TRACE(policy);
    const Step step = run(mlp(), testing::options_of(policy));
    EXPECT_EQ(step.grads, expected);
    expect_prediction_holds(step);
  }
}

TEST(Plan, BudgetsHoldInRealityAndASmallerBudgetNeverPeaksHigher) {
  const Grads expected = reference(gpt());
  const Step all = run(gpt(), {.policy = "none"});
  const int64_t minimum = minimum_peak(all.graph);
  const int64_t top = all.report.measured_peak_bytes;
  ASSERT_LT(minimum, top);
  for (const std::string policy : {"cost", "chain", "auto"}) {
    SCOPED_TRACE(policy);
    int64_t previous_peak = std::numeric_limits<int64_t>::max();
    for (double fraction : {1.0, 0.8, 0.6, 0.45, 0.3, 0.0}) {
      const int64_t lowest = budget_for(minimum);  // the planner keeps a 1% margin
      const int64_t budget = lowest + static_cast<int64_t>(fraction * static_cast<double>(top - lowest));
      SCOPED_TRACE(budget);
      Step step;
      try {
        // The minimum is the graph's bytes' (Note [Budgets from bytes
        // alone]): the lowest budget is planned whatever the step measured.
        step = run(gpt(), {.policy = policy, .budget = budget}, 4);
      } catch (const Error& e) {
        ADD_FAILURE() << e.what();
        continue;
      }
      EXPECT_EQ(step.grads, expected);
      EXPECT_LE(step.report.measured_peak_bytes, budget) << step.report.str();
      EXPECT_LE(step.report.measured_peak_bytes, previous_peak) << step.report.str();
      expect_prediction_holds(step);
      previous_peak = step.report.measured_peak_bytes;
    }
  }
}

TEST(Plan, ABudgetBelowTheMinimumNamesIt) {
  const Step all = run(gpt(), {.policy = "none"});
  const int64_t minimum = minimum_peak(all.graph);
  const int64_t needed = minimum_budget(all.graph);  // the planner keeps a 1% margin
  const std::string message = testing::error_of([&] { make_plan(all.graph, {.policy = "cost", .budget = needed - 1}); });
  EXPECT_TRUE(testing::contains(message, fmt::format("is {} bytes", minimum))) << message;
  EXPECT_TRUE(testing::contains(message, fmt::format("at least {} bytes", needed))) << message;
  EXPECT_NO_THROW(make_plan(all.graph, {.policy = "cost", .budget = needed}));
}


// It plans for nine tenths of its 5%, so that the 5% holds through timer
// noise (TheTrainingStepIsTheTimedStepWithinBounds and
// TheProfileCarriesTheStepAsTimedLessItsReplays check the step it reads).
TEST(Plan, CostWithoutBudgetPlansItsReplaysWithinNineTenthsOfATwentiethOfTheStep) {
  const Step all = run(gpt(), {.policy = "none"});
  const Plan plan = make_plan(all.graph, {.policy = "cost"});
  EXPECT_LE(plan.predicted.recompute_ms, 0.9 * 0.05 * all.graph.training_step_ms());
  EXPECT_GT(plan.dropped_bytes, 0);
  EXPECT_LT(plan.predicted.peak_bytes, all.report.measured_peak_bytes);
}

TEST(Plan, AutoNeverReplaysLongerThanCostOrChainWithinABudget) {
  const Step all = run(gpt(), {.policy = "none"});
  const int64_t low = minimum_budget(all.graph), high = all.report.measured_peak_bytes;
  for (int i = 0; i <= 4; ++i) {
    const int64_t budget = low + (high - low) * i / 4;
    const Plan cost = make_plan(all.graph, {.policy = "cost", .budget = budget});
    const Plan chain = make_plan(all.graph, {.policy = "chain", .budget = budget});
    const Plan best = make_plan(all.graph, {.policy = "auto", .budget = budget});
    EXPECT_LE(best.predicted.recompute_ms, cost.predicted.recompute_ms) << "budget " << budget;
    EXPECT_LE(best.predicted.recompute_ms, chain.predicted.recompute_ms) << "budget " << budget;
    for (const Plan* plan : {&cost, &chain, &best}) EXPECT_LE(plan->predicted.peak_bytes, budget) << plan->policy;
    // It names the policy whose plan won, and that policy's plan is as fast.
    const std::vector<std::string> owners{"cost", "chain", "blocks", "sqrt", "least-memory search"};
    EXPECT_NE(std::find(owners.begin(), owners.end(), best.chosen_by), owners.end()) << best.chosen_by;
    if (best.chosen_by == "cost") { EXPECT_EQ(best.predicted.recompute_ms, cost.predicted.recompute_ms); }
  }
}

TEST(Plan, UserRulesBindEveryPolicy) {
  const Step all = run(gpt(), {.policy = "none"});
  const Overrides rules{.must_keep = {"gelu"}, .must_recompute = {"layer_norm"}};
  auto obeyed = [&](const Plan& plan) {
    for (const NodeProfile& node : all.graph.nodes) {
      if (node.op == "gelu") {
        EXPECT_EQ(plan.tags[node.position], Tag::Keep) << plan.policy << " " << plan.detail;
      }
      if (node.op == "layer_norm") {
        EXPECT_EQ(plan.tags[node.position], Tag::Recompute) << plan.policy << " " << plan.detail;
      }
    }
  };
  for (const std::string& policy : policy_names()) {
    if (policy == "dtr") continue;  // plans nothing (tests/scheduler/dtr_test.cpp)
    PlanOptions options = testing::options_of(policy);
    options.overrides = rules;
    obeyed(make_plan(all.graph, options));
  }
  // Within a budget too, where chain and milp trade: halfway from the
  // smallest budget the rules allow to the peak of keeping the rest.
  const Plan kept = make_plan(all.graph, {.policy = "none", .overrides = rules});
  const int64_t budget = std::max(kept.minimum_budget_bytes,
                                  (kept.minimum_budget_bytes + kept.predicted.peak_bytes) / 2);
  for (const std::string& policy : policy_names()) {
    PlanOptions options = testing::options_of(policy);
    if (!takes_budget(options.policy) || policy == "dtr") continue;
    options.budget = budget;
    options.overrides = rules;
    const Plan plan = make_plan(all.graph, options);
    obeyed(plan);
    EXPECT_LE(plan.predicted.peak_bytes, budget) << policy;
  }
  const Step step = run(gpt(), {.policy = "blocks", .overrides = rules});
  EXPECT_EQ(step.grads, reference(gpt()));
  const std::string typo = testing::error_of([&] { make_plan(all.graph, {.overrides = {.must_keep = {"gelo"}}}); });
  EXPECT_TRUE(testing::contains(typo, "'gelo'")) << typo;
  EXPECT_TRUE(testing::contains(typo, "gelu")) << typo;
}

TEST(Plan, ACheckpointRegionIsReplayedAndItsOutputKept) {
  Tensor w = normal({16, 16}, 0.0, 1.0, DType::Float32).requires_grad_();
  const Tensor x = normal({8, 16}, 0.0, 1.0, DType::Float32);
  auto body = [&](const Tensors& in) { return tanh(relu(matmul(in[0], w))); };
  const auto profiler = std::make_shared<Profiler>();
  Tensor loss;
  {
    GraphObserverScope profiling(profiler);
    loss = sum(relu(checkpoint(body, {x})));
  }
  const Node* outside = loss.grad_fn()->next_edges()[0].node.get();  // relu after the region
  const Node* region_output = outside->next_edges()[0].node.get();   // tanh
  EXPECT_EQ(region_output->tag(), Tag::Keep);
  EXPECT_EQ(region_output->next_edges()[0].node->tag(), Tag::Recompute);
  loss.backward();
  const Tensor with_region = w.grad();
  EXPECT_GT(profiler->replays().nodes, 0);
  w.set_grad(Tensor());
  sum(relu(body({x}))).backward();
  EXPECT_EQ(with_region.to_vector<float>(), w.grad().to_vector<float>());
}

// Attention's probabilities, dropped: x @ w, scaled, masked and softmaxed,
// then weighted by a constant (whose backward reads only the constant).
// Softmax's backward asks for the four links to be replayed.
Workload attention_probabilities() {
  return [] {
    Generator g(9);
    Tensor w = normal({32, 64}, 0.0, 0.2, DType::Float32, g).requires_grad_();
    w.storage()->set_category(MemoryCategory::Parameter);
    const Tensor x = as_data([&] { return normal({4, 64, 32}, 0.0, 1.0, DType::Float32, g); });
    const Tensor c = as_data([&] { return normal({4, 64, 64}, 0.0, 1.0, DType::Float32, g); });
    const Tensor mask = as_data([] { return causal_mask(64); });
    Tensor h = matmul(x, w);  // one statement per link, so that each goes when the next is made
    h = mul(h, 0.125);
    h = masked_fill(h, mask, -INFINITY);
    h = softmax(h, -1);
    return std::pair{sum(mul(h, c)), std::vector<Tensor>{w}};
  };
}

// Note [Replays in place]: replayed, mul writes over the scores, masked_fill
// over mul's output and softmax over masked_fill's, since each link is read
// by the next one only. The chain then holds one (4, 64, 64) buffer, not
// two, next to softmax's incoming gradient, and the simulator knows it.
TEST(Plan, ReplaysWriteOverLinksNothingElseReads) {
  const Overrides dropped{.must_recompute = {"matmul", "mul", "masked_fill", "softmax"}};
  const Step step = run(attention_probabilities(), {.policy = "none", .overrides = dropped});
  EXPECT_EQ(step.grads, reference(attention_probabilities()));
  EXPECT_EQ(step.report.replayed_nodes, 4);
  expect_prediction_holds(step);
  ASSERT_TRUE(step.plan.has_value());
  GraphProfile out_of_place = step.graph;
  for (NodeProfile& node : out_of_place.nodes) node.overwritable_input = -1;
  const int64_t buffer = 4 * 64 * 64 * 4;
  const int64_t predicted = step.plan->predicted.peak_bytes;
  EXPECT_EQ(simulate(out_of_place, step.plan->tags).peak_bytes - predicted, buffer);
  EXPECT_LT(step.report.measured_peak_bytes, predicted + buffer / 2);
  for (const NodeProfile& node : step.graph.nodes) {
    const bool replayed = step.plan->predicted.replay_ms[static_cast<size_t>(node.position)] > 0;
    const bool link = node.op == "mul" || node.op == "masked_fill" || node.op == "softmax";
    EXPECT_EQ(step.plan->predicted.replayed_in_place[static_cast<size_t>(node.position)], replayed && link) << node.op;
  }
}

// The Profiler times each replay (NodeMeasures::replay_ms) and notes whether it
// ran in place; plans price a replay at what replays of its kind took, not
// at its forward's time.
TEST(Plan, ReplaysArePricedAtTheirTimedReplays) {
  const Overrides dropped{.must_recompute = {"matmul", "mul", "masked_fill", "softmax"}};
  const Step step = run(attention_probabilities(), {.policy = "none", .overrides = dropped}, 3);
  ASSERT_TRUE(step.plan.has_value());
  double priced = 0;
  int replayed = 0;
  for (const NodeProfile& node : step.graph.nodes) {
    if (step.plan->predicted.replay_ms[static_cast<size_t>(node.position)] == 0) continue;
    const bool first_link = node.op == "matmul";  // writes a new output; the other three over it
    EXPECT_EQ(node.replay_ms > 0, first_link) << node.op;
    EXPECT_EQ(node.replay_in_place_ms > 0, !first_link) << node.op;
    priced += first_link ? node.replay_ms : node.replay_in_place_ms;
    ++replayed;
  }
  EXPECT_EQ(replayed, 4);
  EXPECT_DOUBLE_EQ(step.plan->predicted.recompute_ms, priced);
  for (const NodeProfile& node : step.graph.nodes) {
    if (node.op == "sum") {
      EXPECT_EQ(node.replay_ms, 0.0);  // kept: never replayed
    }
  }
}

TEST(Plan, AChangedGraphIsReplannedNeverMisapplied) {
  Checkpointer checkpointer({.policy = "blocks"});
  const Grads small = reference(gpt(4)), large = reference(gpt(6));
  for (int64_t batch : {4, 4, 6, 6, 4}) {
    Tensor loss;
    std::vector<Tensor> params;
    {
      const auto recording = checkpointer.record();
      std::tie(loss, params) = gpt(batch)();
    }
    loss.backward();
    EXPECT_EQ(grads_of(params), batch == 4 ? small : large);
  }
  EXPECT_EQ(checkpointer.cached_plans(), 2u);
  EXPECT_EQ(checkpointer.plans_made(), 2);
  EXPECT_FALSE(checkpointer.report().profiling);  // the last step found its plan in the cache
}

TEST(Plan, TheProfileCarriesTheStepAsTimedLessItsReplays) {
  Checkpointer checkpointer({.policy = "blocks"});
  for (int step = 0; step < 2; ++step) {
    const auto start = std::chrono::steady_clock::now();
    Tensor loss;
    {
      const auto recording = checkpointer.record();
      loss = gpt()().first;
    }
    loss.backward();
    const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const StepReport report = checkpointer.report();
    if (step == 0) continue;  // the profiling step; the plan runs from the second
    ASSERT_GT(report.recompute_ms, 0.0);
    loss = Tensor();
    {
      const auto recording = checkpointer.record();  // settles the step just timed
    }
    ASSERT_NE(checkpointer.profile(), nullptr);
    EXPECT_GT(checkpointer.profile()->step_ms, 0.0);
    EXPECT_LE(checkpointer.profile()->step_ms, wall_ms - report.recompute_ms);
  }
}

TEST(Plan, ANestedRecordingIsAnErrorThatLeavesTheStepIntact) {
  Checkpointer checkpointer({.policy = "blocks"});
  const Grads expected = reference(gpt());
  for (int i = 0; i < 2; ++i) {
    Tensor loss;
    std::vector<Tensor> params;
    {
      const auto recording = checkpointer.record();
      EXPECT_TRUE(testing::contains(testing::error_of([&] { (void)checkpointer.record(); }), "already recording"));
      std::tie(loss, params) = gpt()();
    }
    loss.backward();
    EXPECT_EQ(grads_of(params), expected);
  }
  EXPECT_NE(checkpointer.plan(), nullptr);
}

// A plan made in record() (the step before's: a new graph, a warm
// re-plan) is reported as the step's planning_ms, which step timers leave
// out; a step that plans nothing reports 0.
TEST(Plan, AStepReportsThePlanningItsRecordDid) {
  using namespace std::chrono_literals;
  const CustomPolicy slow = [](const GraphProfile& graph) {
    std::this_thread::sleep_for(30ms);
    return testing::replay_memory_bound(graph);
  };
  Checkpointer checkpointer({.policy = "custom", .custom = slow});
  const auto [reports, grads] = steps_under(checkpointer, gpt(), 2 + CachedPlan::kWarmPlans + 1);
  EXPECT_EQ(reports.front().planning_ms, 0);  // the profiling step
  for (size_t i = 1; i + 1 < reports.size(); ++i) EXPECT_GE(reports[i].planning_ms, 30) << reports[i].str();
  EXPECT_EQ(reports.back().planning_ms, 0);  // planned from the warm steps already
  EXPECT_EQ(grads, reference(gpt()));
}

// steps_until_final_plan counts down the steps that run under a plan a
// later step's record() replaces (the first plan, then the warm re-plans),
// and from 0 on the policy is asked nothing more: bench and tradeoff time
// no step before it, so that the peak they measure is the final plan's.
TEST(Plan, StepsUntilTheFinalPlanCountDownToTheLastRePlan) {
  int asked = 0;
  const CustomPolicy counted = [&asked](const GraphProfile& graph) {
    ++asked;
    return testing::replay_memory_bound(graph);
  };
  Checkpointer checkpointer({.policy = "custom", .custom = counted});
  std::vector<int> left, asked_during;
  for (int step = 0; step < 2 + CachedPlan::kWarmPlans + 1; ++step) {
    left.push_back(checkpointer.steps_until_final_plan());
    const int before = asked;
    steps_under(checkpointer, gpt(), 1);
    asked_during.push_back(asked - before);
  }
  // The profiling step, the first plan and the warm re-plans, then none.
  static_assert(CachedPlan::kWarmPlans == 2, "the counts below are written for two warm re-plans");
  EXPECT_EQ(left, (std::vector<int>{1 + CachedPlan::kWarmPlans, CachedPlan::kWarmPlans, 1, 0, 0}));
  EXPECT_EQ(asked_during, (std::vector<int>{0, 1, 1, 1, 0}));
  EXPECT_EQ(Checkpointer({.policy = "none"}).steps_until_final_plan(), 0);
}

TEST(Plan, UnknownPolicyAndMisplacedBudgetAreErrors) {
  EXPECT_TRUE(testing::contains(testing::error_of([] { Checkpointer({.policy = "sqrtt"}); }),
                                "available: none, blocks, sqrt, cost, chain"));
  EXPECT_TRUE(testing::contains(testing::error_of([] { Checkpointer({.policy = "optimal"}); }), "now policy 'auto'"));
  EXPECT_TRUE(testing::contains(testing::error_of([] { Checkpointer({.policy = "blocks", .budget = 1 << 20}); }),
                                "takes no budget"));
}

}  // namespace
}  // namespace remat::scheduler
