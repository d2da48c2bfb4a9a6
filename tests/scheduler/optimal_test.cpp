// The chain solver of `optimal` against exhaustive search: on random chains
// small enough to enumerate, the same least recompute time (and, at equal
// time, the same peak) within every budget, and the same verdict when
// nothing fits.
#include "scheduler/optimal.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

namespace remat::scheduler {
namespace {

ChainModel random_chain(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> stages(1, 7), modes(1, 4), bytes(0, 64), ms(0, 40);
  ChainModel model;
  model.stages.resize(stages(rng));
  const int m = modes(rng);
  for (auto& stage : model.stages) {
    for (int i = 0; i < m; ++i) {
      // Memory in 1 KiB units and times in quarter milliseconds, so that ties
      // (which the solver breaks by peak) happen often.
      const int64_t held = 1024 * bytes(rng);
      stage.push_back({.held = held, .peak = held + 1024 * bytes(rng), .recompute_ms = 0.25 * ms(rng)});
    }
  }
  return model;
}

TEST(OptimalChain, EqualsExhaustiveSearchOnRandomChains) {
  std::mt19937_64 rng(7);
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const ChainModel model = random_chain(rng);
    const int64_t budget = 1024 * std::uniform_int_distribution<int64_t>(0, 64 * 5)(rng);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ", " << model.stages.size() << " stages, budget "
                                      << budget);
    const auto dp = solve_chain(model, budget);
    const auto exhaustive = solve_chain_exhaustive(model, budget);
    ASSERT_EQ(dp.has_value(), exhaustive.has_value());
    if (!dp) {
      ++infeasible;
      continue;
    }
    ++feasible;
    EXPECT_LE(model.peak_of(*dp), budget);
    EXPECT_EQ(model.recompute_ms_of(*dp), model.recompute_ms_of(*exhaustive));
    EXPECT_EQ(model.peak_of(*dp), model.peak_of(*exhaustive));
  }
  // Both verdicts were exercised.
  EXPECT_GT(feasible, 50);
  EXPECT_GT(infeasible, 20);
}

// The front by enumeration: every (peak, time) no choice beats on both.
std::vector<std::pair<int64_t, double>> exhaustive_front(const ChainModel& model) {
  std::vector<std::pair<int64_t, double>> points;
  std::vector<int> modes(model.stages.size(), 0);
  while (true) {
    points.push_back({model.peak_of(modes), model.recompute_ms_of(modes)});
    size_t i = 0;
    while (i < modes.size() && ++modes[i] == static_cast<int>(model.stages[i].size())) modes[i++] = 0;
    if (i == modes.size()) break;
  }
  std::sort(points.begin(), points.end());
  std::vector<std::pair<int64_t, double>> front;
  for (const auto& point : points) {
    if (front.empty() || point.second < front.back().second) front.push_back(point);
  }
  return front;
}

TEST(OptimalChain, FrontEqualsExhaustiveSearchOnRandomChains) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const ChainModel model = random_chain(rng);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ", " << model.stages.size() << " stages");
    std::vector<std::pair<int64_t, double>> front;
    for (const std::vector<int>& modes : chain_front(model)) {
      front.push_back({model.peak_of(modes), model.recompute_ms_of(modes)});
    }
    EXPECT_EQ(front, exhaustive_front(model));
  }
}

TEST(OptimalChain, KeepsEverythingWhenTheBudgetAllowsAndReplaysWhenItMust) {
  // Two stages: keep (holds 10, peaks 12, free) or replay (holds 1, peaks 11, costs 5).
  ChainModel model;
  model.stages.assign(2, {{.held = 10, .peak = 12, .recompute_ms = 0}, {.held = 1, .peak = 11, .recompute_ms = 5}});
  EXPECT_EQ(*solve_chain(model, 22), (std::vector<int>{0, 0}));  // 10 + 12
  // One replay: the first (peak 1 + 12) beats the second (10 + 11) at equal time.
  EXPECT_EQ(*solve_chain(model, 21), (std::vector<int>{1, 0}));
  EXPECT_EQ(*solve_chain(model, 13), (std::vector<int>{1, 0}));  // 1 + 12
  EXPECT_EQ(*solve_chain(model, 12), (std::vector<int>{1, 1}));  // 1 + 11
  EXPECT_FALSE(solve_chain(model, 11).has_value());
}

}  // namespace
}  // namespace remat::scheduler
