// The least-memory search remembered (scheduler/policies/least_memory.cpp,
// Note [Least-memory plans remembered]): a graph planned again, by another
// policy, at other times or from another step's profile, runs no search,
// and gets the plans a fresh search finds; other bytes or other rules
// search again.
#include "scheduler/policies/policy.h"

#include <gtest/gtest.h>

#include "scheduler/search.h"
#include "tests/support/plan_workloads.h"
#include "tests/support/plans.h"

namespace remat::scheduler {
namespace {

using namespace plan_testing;
using policies::least_memory_searches;

// The same plans, to the bit: tags, simulated peak and replay time, origin.
void expect_same_plans(const std::vector<search::Candidate>& a, const std::vector<search::Candidate>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].origin);
    EXPECT_EQ(a[i].tags, b[i].tags);
    EXPECT_EQ(a[i].sim.peak_bytes, b[i].sim.peak_bytes);
    EXPECT_EQ(a[i].sim.saved_bytes_after_forward, b[i].sim.saved_bytes_after_forward);
    EXPECT_EQ(a[i].sim.recompute_ms, b[i].sim.recompute_ms);
    EXPECT_EQ(a[i].sim.replay_ms, b[i].sim.replay_ms);
    EXPECT_EQ(a[i].origin, b[i].origin);
  }
}

TEST(LeastMemory, AGraphPlannedAgainIsSearchedOnce) {
  const Step all = run(gpt(), {.policy = "none"});
  const int64_t budget = (minimum_budget(all.graph) + all.report.measured_peak_bytes) / 2;
  policies::forget_least_memory_plans();
  const int64_t searches = least_memory_searches();
  const Plan cost = make_plan(all.graph, {.policy = "cost", .budget = budget});
  EXPECT_EQ(least_memory_searches(), searches + 1);
  // Again, by other policies, and at other times: the same bytes.
  EXPECT_EQ(make_plan(all.graph, {.policy = "cost", .budget = budget}).tags, cost.tags);
  make_plan(all.graph, {.policy = "chain", .budget = budget});
  make_plan(all.graph, {.policy = "none"});
  const GraphProfile noisy = testing::with_noisy_times(all.graph, 5);
  make_plan(noisy, {.policy = "auto", .budget = budget});
  EXPECT_EQ(minimum_peak(noisy), cost.minimum_peak_bytes);
  EXPECT_EQ(least_memory_searches(), searches + 1);

  // What it remembered is what a fresh search finds, priced at the caller's times.
  const search::Context c(noisy, {});
  const std::vector<search::Candidate> remembered = policies::least_memory_plans(c, {});
  EXPECT_EQ(least_memory_searches(), searches + 1);
  policies::forget_least_memory_plans();
  const std::vector<search::Candidate> fresh = policies::least_memory_plans(c, {});
  EXPECT_EQ(least_memory_searches(), searches + 2);
  expect_same_plans(remembered, fresh);
  // Priced at noisy's times, not at the times of the graph first searched.
  const search::Context measured(all.graph, {});
  const std::vector<search::Candidate> at_measured = policies::least_memory_plans(measured, {});
  ASSERT_EQ(at_measured.size(), fresh.size());
  bool priced_apart = false;
  for (size_t i = 0; i < fresh.size(); ++i) priced_apart |= at_measured[i].sim.recompute_ms != fresh[i].sim.recompute_ms;
  EXPECT_TRUE(priced_apart);

  // Other rules, or another graph: searched.
  make_plan(all.graph, {.policy = "cost", .budget = budget, .overrides = {.must_keep = {"gelu"}}});
  EXPECT_EQ(least_memory_searches(), searches + 3);
  const Step bigger = run(gpt(8), {.policy = "none"});
  make_plan(bigger.graph, {.policy = "none"});
  EXPECT_EQ(least_memory_searches(), searches + 4);
}

// A Checkpointer plans the graph from its first step and again from each
// warm step's profile (CachedPlan::kWarmPlans): other sequence numbers,
// tags and times, and here other checkpoint-region ids, the same bytes.
TEST(LeastMemory, TheWarmReplansOfAStepSearchNoMore) {
  const Workload with_region = [] {
    Generator g(4);
    Tensor w = normal({16, 16}, 0.0, 0.3, DType::Float32, g).requires_grad_();
    w.storage()->set_category(MemoryCategory::Parameter);
    const Tensor x = as_data([&] { return normal({8, 16}, 0.0, 1.0, DType::Float32, g); });
    const auto body = [&](const Tensors& in) { return tanh(relu(matmul(in[0], w))); };
    const Tensor h = relu(matmul(checkpoint(body, {x}), w));
    return std::pair{sum(tanh(h)), std::vector<Tensor>{w}};
  };
  policies::forget_least_memory_plans();
  const int64_t searches = least_memory_searches();
  Checkpointer checkpointer({.policy = "cost"});
  const auto [reports, grads] = steps_under(checkpointer, with_region, 2 + CachedPlan::kWarmPlans + 1);
  EXPECT_EQ(checkpointer.plans_made(), 1);
  EXPECT_EQ(least_memory_searches(), searches + 1);
  EXPECT_EQ(grads, reference(with_region));
}

}  // namespace
}  // namespace remat::scheduler
