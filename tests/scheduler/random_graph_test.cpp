// Property tests of the scheduler on random graphs of the ops in ops/ops.h:
// whatever the policy and budget, a planned step's gradients are bit-identical
// to keeping everything, its measured peak fits the budget and is the
// simulator's prediction to the byte, and so are its replays; budgets below the
// minimum are errors naming it; a smaller budget never gives a larger peak.
// Graph i is built from seed kBaseSeed + i (+ 1000 or 2000 per test), which
// every failure names with the graph it built. Under the sanitizers every
// 3rd graph is run (testing::graph_indices).
// Budgets from bytes alone: random_graph_budgets_test.cpp; reductions of
// what these found: random_graph_findings_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/allocator.h"
#include "ops/ops.h"
#include "scheduler/checkpointer.h"
#include "scheduler/profiler.h"
#include "scheduler/plan.h"
#include "scheduler/simulate.h"
#include "tests/support/errors.h"
#include "tests/support/plans.h"
#include "tests/support/random_graph.h"
#include "tests/support/random_graph_steps.h"

namespace remat::scheduler {
namespace {

using namespace random_graph_testing;
using testing::RandomGraph;

// One graph of PlannedStepMatchesKeepAll...: two steps through a Checkpointer.
// Two steps of `graph` under `policy` within `budget`: the second, planned
// step gives the keep-all gradients bit for bit, stays within the budget,
// measures the peak the simulator predicted and replays what it predicted.
void check_policy_step(uint64_t seed, RandomGraph& graph, const Reference& ref, const std::string& policy,
                       std::optional<int64_t> budget) {
  SCOPED_TRACE(trace(seed, graph, policy, budget));
  try {
    Checkpointer checkpointer({.policy = policy, .budget = budget});
    for (int step = 1; step <= 2; ++step) {
      recorded_step(checkpointer, graph);
      if (step == 1) continue;
      ASSERT_NE(checkpointer.plan(), nullptr);
      const Plan& plan = *checkpointer.plan();
      const StepReport report = checkpointer.report();
      EXPECT_EQ(first_difference(ref.grads, gradients_of(graph)), "");
      if (budget) {
        EXPECT_LE(report.measured_peak_bytes, *budget);
      }
      ASSERT_TRUE(report.predicted_peak_bytes.has_value());
      EXPECT_EQ(report.measured_peak_bytes, *report.predicted_peak_bytes)
          << "replayed:" << testing::replayed_positions(plan.tags);
      EXPECT_EQ(report.replayed_nodes, plan.predicted.replayed_nodes);
      EXPECT_EQ(report.recompute_flops, plan.predicted.recompute_flops);
    }
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
  }
}

// A budget from the graph's minimum up to keep-all's peak (the minimum
// depends on bytes alone: Note [Budgets from bytes alone]; before, it
// followed the measured times and the Checkpointer's own profiling step
// could reach less low).
int64_t random_budget(const Reference& ref, std::mt19937_64& rng) {
  const int64_t low = minimum_budget(ref.profile);
  const int64_t high = std::max(low, budget_for(peak_of(ref.profile, "none")));
  return low + static_cast<int64_t>(rng() % static_cast<uint64_t>(high - low + 1));
}

// One policy drawn from the five the seeds were first drawn against (auto
// in the slot of the pooled planner it was called before), half the time
// with a budget where it takes one; then chain or milp, in turn, within a
// budget.
void check_planned_step(uint64_t seed, DType dtype, int& budgets) {
  const std::vector<std::string> drawn{"none", "blocks", "sqrt", "cost", "auto"};
  std::mt19937_64 rng(seed * 7919);
  RandomGraph graph(seed, dtype);
  const Reference ref = reference_step(graph);
  const std::string policy = drawn[rng() % drawn.size()];
  std::optional<int64_t> budget;
  if (takes_budget(policy) && rng() % 2 == 0) {
    budget = random_budget(ref, rng);
    ++budgets;
  }
  check_policy_step(seed, graph, ref, policy, budget);
  const int64_t solver_budget = random_budget(ref, rng);
  check_policy_step(seed, graph, ref, seed % 2 ? "chain" : "milp", solver_budget);
}

// 240 graphs (every 8th in float64), each under a random policy and, for
// cost and auto, half the time a random budget up to keep-all's, then under
// chain or milp within a random budget: check_policy_step.
TEST(RandomGraph, PlannedStepMatchesKeepAllGradientsAndPredictedPeak) {
  int budgets = 0;
  for (const uint64_t i : testing::graph_indices(240)) {
    check_planned_step(kBaseSeed + i, i % 8 == 7 ? DType::Float64 : DType::Float32, budgets);
  }
  EXPECT_GT(budgets, 20 / static_cast<int>(testing::kGraphStride));
}

// 240 graphs (every 8th in float64) under policy dtr (no plan: eviction at
// run time), two steps each, at a random budget: for even graphs from 1 byte
// to keep-all's peak, for odd ones from the least budget a static plan
// meets (minimum_budget) to keep-all's. The gradients are keep-all's bit
// for bit, the measured peak never passes the budget by more than the
// excess the step reported, and stays within it when no allocation went
// over; from the static minimum up, dtr fits nearly always.
TEST(RandomGraph, DtrStepsMatchKeepAllGradientsWithinTheirBudget) {
  int evicting = 0, within = 0, above_minimum = 0, within_above_minimum = 0;
  for (const uint64_t i : testing::graph_indices(240)) {
    const uint64_t seed = kBaseSeed + 3000 + i;
    RandomGraph graph(seed, i % 8 == 7 ? DType::Float64 : DType::Float32);
    const Reference ref = reference_step(graph);
    std::mt19937_64 rng(seed * 104729);
    const int64_t keep_all = std::max<int64_t>(1, peak_of(ref.profile, "none"));
    const bool from_minimum = i % 2 == 1;
    const int64_t low = from_minimum ? minimum_budget(ref.profile) : 1;
    const int64_t high = std::max(low, from_minimum ? budget_for(keep_all) : keep_all);
    const int64_t budget = low + static_cast<int64_t>(rng() % static_cast<uint64_t>(high - low + 1));
    SCOPED_TRACE(trace(seed, graph, "dtr", budget));
    try {
      Checkpointer checkpointer({.policy = "dtr", .budget = budget});
      for (int step = 1; step <= 2; ++step) {
        recorded_step(checkpointer, graph);
        const StepReport report = checkpointer.report();
        EXPECT_EQ(first_difference(ref.grads, gradients_of(graph)), "") << report.str();
        EXPECT_LE(report.measured_peak_bytes, budget + report.max_over_budget_bytes) << report.str();
        if (report.over_budget_allocations == 0) { EXPECT_LE(report.measured_peak_bytes, budget) << report.str(); }
        if (step == 2) {
          evicting += report.evictions > 0 ? 1 : 0;
          within += report.over_budget_allocations == 0 ? 1 : 0;
          above_minimum += from_minimum ? 1 : 0;
          within_above_minimum += from_minimum && report.over_budget_allocations == 0 ? 1 : 0;
        }
      }
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
  // The budgets span the range: many graphs evict, and many fit.
  EXPECT_GT(evicting, 60 / static_cast<int>(testing::kGraphStride));
  EXPECT_GT(within, 30 / static_cast<int>(testing::kGraphStride));
  EXPECT_GE(within_above_minimum * 10, above_minimum * 9) << within_above_minimum << " of " << above_minimum;
  RecordProperty("evicting", evicting);
  RecordProperty("within", within);
  RecordProperty("within_above_minimum", fmt::format("{} of {}", within_above_minimum, above_minimum));
}

// On each graph's profile: a budget one byte below minimum_peak is an
// error for cost, chain and auto (minimum_peak is "the smallest simulated
// peak any policy reaches"), cost's message names minimum_peak, and the
// budget each planner's message says is needed is accepted.
TEST(RandomGraph, BudgetBelowMinimumIsAnErrorNamingIt) {
  for (const uint64_t i : testing::graph_indices(60)) {
    const uint64_t seed = kBaseSeed + 1000 + i;
    RandomGraph graph(seed, DType::Float32);
    const Reference ref = reference_step(graph);
    const int64_t minimum = minimum_peak(ref.profile);
    SCOPED_TRACE(trace(seed, graph, "cost, chain and auto", minimum - 1));
    const std::string cost =
        testing::error_of([&] { make_plan(ref.profile, {.policy = "cost", .budget = minimum - 1}); });
    EXPECT_TRUE(testing::contains(cost, fmt::format("the smallest peak it reaches on this graph is {} bytes", minimum)))
        << cost;
    for (const std::string policy : {"chain", "auto"}) {
      const std::string error =
          testing::error_of([&] { make_plan(ref.profile, {.policy = policy, .budget = minimum - 1}); });
      EXPECT_TRUE(testing::contains(error, "the smallest peak it reaches on this graph is")) << error;
    }
    for (const std::string policy : {"cost", "chain", "auto"}) {
      const int64_t needed = stated_minimum_budget(ref.profile, policy);
      try {
        EXPECT_LE(make_plan(ref.profile, {.policy = policy, .budget = needed}).predicted.peak_bytes, needed);
      } catch (const Error& e) {
        ADD_FAILURE() << policy << " refuses the budget its own error names: " << e.what();
      }
    }
  }
}

// For cost, on one profile: budgets from keep-all's down to the minimum
// the planner names give predicted peaks that never rise as the budget
// falls, and measured peaks that stay within each budget, equal the
// prediction and never rise either.
TEST(RandomGraph, SmallerBudgetNeverGivesLargerPeakForCost) {
  for (const uint64_t i : testing::graph_indices(60)) {
    const uint64_t seed = kBaseSeed + 2000 + i;
    RandomGraph graph(seed, DType::Float32);
    const Reference ref = reference_step(graph);
    const int64_t low = stated_minimum_budget(ref.profile, "cost");
    const int64_t high = std::max(low, budget_for(peak_of(ref.profile, "none")));
    SCOPED_TRACE(trace(seed, graph, "cost", std::nullopt));
    std::optional<int64_t> last_predicted, last_measured, last_budget;
    constexpr int kSteps = 6;
    try {
      for (int k = 0; k <= kSteps; ++k) {
        const int64_t budget = high - (high - low) * k / kSteps;
        const Plan plan = make_plan(ref.profile, {.policy = "cost", .budget = budget});
        const int64_t measured = measured_peak(graph, ref.profile, plan);
        const int64_t predicted = plan.predicted.peak_bytes;
        EXPECT_LE(predicted, budget);
        EXPECT_LE(measured, budget) << "predicted " << predicted;
        EXPECT_EQ(measured, predicted) << "replayed:" << testing::replayed_positions(plan.tags);
        if (last_budget) {
          EXPECT_LE(predicted, *last_predicted) << "budget " << budget << " after " << *last_budget;
          EXPECT_LE(measured, *last_measured) << "budget " << budget << " after " << *last_budget << "; predicted "
                                              << predicted << " after " << *last_predicted;
        }
        last_predicted = predicted;
        last_measured = measured;
        last_budget = budget;
      }
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

}  // namespace
}  // namespace remat::scheduler
