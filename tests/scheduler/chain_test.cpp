// Policy `chain` against exhaustive search: its dynamic program on random
// chain models of up to 12 stages, with and without options (the same
// least recompute time, and at equal time the same peak, within every
// budget; the same verdict when nothing fits; the same front), and its plans on a profiled MLP, a chain
// whose stages are single nodes, against every choice of tags simulated.
#include "scheduler/policies/chain.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "engine/allocator.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "scheduler/checkpointer.h"
#include "scheduler/plan.h"
#include "scheduler/search.h"

namespace remat::scheduler {
namespace {

// Memory in 1 KiB units and times in quarter milliseconds, so that ties
// (which the solver breaks by peak) happen often. A group's bytes grow
// with its length; its replay costs what its stages' forwards cost.
ChainModel random_chain(std::mt19937_64& rng, int max_stages) {
  std::uniform_int_distribution<int> stages(1, max_stages), bytes(0, 64), ms(0, 40);
  ChainModel model;
  const int n = stages(rng);
  std::vector<int64_t> size(n);
  std::vector<double> forward(n);
  for (int s = 0; s < n; ++s) {
    size[s] = 1024 * bytes(rng);
    forward[s] = 0.25 * ms(rng);
    model.keep.push_back({.held = size[s], .peak = size[s] + 1024 * bytes(rng), .recompute_ms = 0});
  }
  model.replay.resize(n);
  for (int i = 0; i < n; ++i) {
    int64_t span = 0;
    double time = 0;
    for (int j = i; j < n; ++j) {
      span += size[j];
      time += forward[j];
      const int64_t held = 1024 * bytes(rng) / 4;
      model.replay[i].push_back({.held = held, .peak = held + span / 2 + 1024 * bytes(rng), .recompute_ms = time});
    }
  }
  return model;
}

TEST(Chain, EqualsExhaustiveSearchOnRandomChainsOfUpTo12Stages) {
  std::mt19937_64 rng(7);
  int feasible = 0, infeasible = 0, long_chains = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const ChainModel model = random_chain(rng, trial < 20 ? 12 : 8);
    long_chains += model.size() >= 10;
    const int64_t budget = 1024 * std::uniform_int_distribution<int64_t>(0, 64 * 6)(rng);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ", " << model.size() << " stages, budget " << budget);
    const auto dp = solve_chain(model, budget);
    const auto exhaustive = solve_chain_exhaustive(model, budget);
    ASSERT_EQ(dp.has_value(), exhaustive.has_value());
    if (!dp) {
      ++infeasible;
      continue;
    }
    ++feasible;
    EXPECT_TRUE(valid(model, *dp));
    EXPECT_LE(peak_of(model, *dp), budget);
    EXPECT_EQ(recompute_ms_of(model, *dp), recompute_ms_of(model, *exhaustive));
    EXPECT_EQ(peak_of(model, *dp), peak_of(model, *exhaustive));
  }
  // Both verdicts were exercised, and chains of 10 to 12 stages.
  EXPECT_GT(feasible, 50);
  EXPECT_GT(infeasible, 20);
  EXPECT_GT(long_chains, 3);
}

// The front by enumeration: every (peak, time) no choice beats on both.
std::vector<std::pair<int64_t, double>> exhaustive_front(const ChainModel& model) {
  std::vector<std::pair<int64_t, double>> points;
  ChainChoice choice(model.size(), kKept);
  while (true) {
    if (valid(model, choice)) points.push_back({peak_of(model, choice), recompute_ms_of(model, choice)});
    size_t i = 0;
    auto last_mode = [&](size_t s) { return std::max<int>(kOptionOn, kOption + int(model.options_at(s).size()) - 1); };
    while (i < choice.size() && ++choice[i] > last_mode(i)) choice[i++] = kKept;
    if (i == choice.size()) break;
  }
  std::sort(points.begin(), points.end());
  std::vector<std::pair<int64_t, double>> front;
  for (const auto& point : points) {
    if (front.empty() || point.second < front.back().second) front.push_back(point);
  }
  return front;
}

TEST(Chain, FrontEqualsExhaustiveSearchOnRandomChains) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const ChainModel model = random_chain(rng, 8);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ", " << model.size() << " stages");
    std::vector<std::pair<int64_t, double>> front;
    for (const ChainChoice& choice : chain_front(model)) {
      front.push_back({peak_of(model, choice), recompute_ms_of(model, choice)});
    }
    EXPECT_EQ(front, exhaustive_front(model));
  }
}

// Options (milp's blocks planned apart: policies/milp_blocks.h): up to two
// more ways to plan a group of 1 to 3 stages from each stage, each with
// its own held bytes, peak and time.
ChainModel with_options(ChainModel model, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> count(0, 2), span(0, 2), bytes(0, 64), ms(0, 40);
  model.options.resize(model.size());
  for (size_t i = 0; i < model.size(); ++i) {
    for (int k = count(rng); k > 0; --k) {
      const size_t last = std::min(model.size() - 1, i + static_cast<size_t>(span(rng)));
      const int64_t held = 1024 * bytes(rng) / 2;
      const StageCost cost{.held = held, .peak = held + 1024 * bytes(rng), .recompute_ms = 0.25 * ms(rng)};
      model.options[i].push_back({last, cost});
    }
  }
  return model;
}

TEST(Chain, WithOptionsEqualsExhaustiveSearchAndItsFront) {
  std::mt19937_64 rng(13);
  int feasible = 0, with_option = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const ChainModel model = with_options(random_chain(rng, 7), rng);
    const int64_t budget = 1024 * std::uniform_int_distribution<int64_t>(0, 64 * 5)(rng);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ", " << model.size() << " stages, budget " << budget);
    const auto dp = solve_chain(model, budget);
    const auto exhaustive = solve_chain_exhaustive(model, budget);
    ASSERT_EQ(dp.has_value(), exhaustive.has_value());
    if (dp) {
      ++feasible;
      with_option += std::any_of(dp->begin(), dp->end(), [](int mode) { return mode >= kOption; });
      EXPECT_TRUE(valid(model, *dp));
      EXPECT_LE(peak_of(model, *dp), budget);
      EXPECT_EQ(recompute_ms_of(model, *dp), recompute_ms_of(model, *exhaustive));
      EXPECT_EQ(peak_of(model, *dp), peak_of(model, *exhaustive));
    }
    std::vector<std::pair<int64_t, double>> front;
    for (const ChainChoice& choice : chain_front(model)) {
      front.push_back({peak_of(model, choice), recompute_ms_of(model, choice)});
    }
    EXPECT_EQ(front, exhaustive_front(model));
  }
  EXPECT_GT(feasible, 50);
  EXPECT_GT(with_option, 20) << "the optimum took an option";
}

TEST(Chain, AnOptionCoversExactlyItsStages) {
  ChainModel model;
  model.keep.assign(3, {.held = 1, .peak = 1});
  model.replay = {{{}, {}, {}}, {{}, {}}, {{}}};
  model.options = {{{.last = 1, .cost = {}}}, {}, {}};
  EXPECT_TRUE(valid(model, {kOption, kOptionOn, kKept}));
  EXPECT_FALSE(valid(model, {kOption, kKept, kKept})) << "the option ends at stage 1";
  EXPECT_FALSE(valid(model, {kOption, kOptionOn, kOptionOn})) << "and not at 2";
  EXPECT_FALSE(valid(model, {kKept, kOption, kOptionOn})) << "stage 1 has no option";
  EXPECT_FALSE(valid(model, {kOption + 1, kOptionOn, kKept})) << "stage 0 has one option";
  EXPECT_FALSE(valid(model, {kKept, kOptionOn, kKept}));
  EXPECT_FALSE(valid(model, {kReplayedOn, kOptionOn, kKept}));
}

TEST(Chain, ReplaysAGroupOnlyWhenTheBudgetNeedsIt) {
  // Two stages: kept (holds 10, peaks 12, free), replayed alone (holds 1,
  // peaks 11, costs 5), or replayed together (holds 1, peaks 14, costs 8).
  ChainModel model;
  model.keep.assign(2, {.held = 10, .peak = 12, .recompute_ms = 0});
  model.replay = {{{.held = 1, .peak = 11, .recompute_ms = 5}, {.held = 1, .peak = 14, .recompute_ms = 8}},
                  {{.held = 1, .peak = 11, .recompute_ms = 5}}};
  EXPECT_EQ(*solve_chain(model, 22), (ChainChoice{kKept, kKept}));  // 10 + 12
  // One replay: the first (peak 1 + 12) beats the second (10 + 11) at equal time.
  EXPECT_EQ(*solve_chain(model, 21), (ChainChoice{kReplayedToHere, kKept}));
  EXPECT_EQ(*solve_chain(model, 13), (ChainChoice{kReplayedToHere, kKept}));  // 1 + 12
  EXPECT_EQ(*solve_chain(model, 12), (ChainChoice{kReplayedToHere, kReplayedToHere}));  // 1 + 11, 10 ms
  EXPECT_FALSE(solve_chain(model, 11).has_value());
  // Replayed as one group, the two cost less than apart when a budget allows its peak.
  model.replay[0][1] = {.held = 1, .peak = 12, .recompute_ms = 8};
  EXPECT_EQ(*solve_chain(model, 12), (ChainChoice{kReplayedOn, kReplayedToHere}));
}

// An MLP is a chain whose every node is a stage: chain's plans range over
// every choice of tags, so within every budget from the graph's minimum to
// keep-all's peak its plan replays no longer than the best of them all,
// each simulated.
TEST(Chain, OnAnMlpEqualsEveryChoiceOfTagsSimulated) {
  Checkpointer checkpointer({.policy = "none"});
  for (int step = 0; step < 2; ++step) {
    Tensor loss;
    {
      const auto recording = checkpointer.record();
      Generator g(3);
      nn::MLP model(std::vector<int64_t>{64, 128, 96, 128, 64, 128, 96, 64, 128, 10}, g);
      CategoryGuard data(MemoryCategory::Data);
      const Tensor x = normal({32, 64}, 0.0, 1.0, DType::Float32, g);
      const Tensor targets = randint(10, {32}, g);
      CategoryGuard activations(MemoryCategory::Activation);
      loss = cross_entropy(model.forward(x), targets);
    }
    loss.backward();
  }
  const GraphProfile& graph = *checkpointer.profile();
  const search::Context c(graph, {});
  std::vector<int64_t> decidable;
  for (int64_t v = 0; v < graph.size(); ++v) {
    if (c.decidable(v)) decidable.push_back(v);
  }
  ASSERT_GE(decidable.size(), 8u);
  ASSERT_LE(decidable.size(), 14u);
  struct Point {
    int64_t peak;
    double ms;
  };
  std::vector<Point> every;
  for (uint64_t mask = 0; mask < (uint64_t{1} << decidable.size()); ++mask) {
    std::vector<Tag> tags = search::all(c, Tag::Keep);
    for (size_t i = 0; i < decidable.size(); ++i) {
      if (mask >> i & 1) tags[decidable[i]] = Tag::Recompute;
    }
    search::settle_unread(c, tags);
    const Simulation sim = c.simulate(tags);
    every.push_back({sim.peak_bytes, sim.recompute_ms});
  }
  const int64_t low = minimum_budget(graph), high = budget_for(simulate(graph, search::all(c, Tag::Keep)).peak_bytes);
  int replayed = 0;
  for (int i = 0; i <= 8; ++i) {
    const int64_t budget = low + (high - low) * i / 8;
    SCOPED_TRACE(::testing::Message() << "budget " << budget);
    const Plan plan = make_plan(graph, {.policy = "chain", .budget = budget});
    double best = 1e300;
    for (const Point& p : every) {
      if (p.peak <= search::planning_target(budget)) best = std::min(best, p.ms);
    }
    EXPECT_EQ(plan.chosen_by, "chain");
    EXPECT_LE(plan.predicted.peak_bytes, search::planning_target(budget));
    EXPECT_NEAR(plan.predicted.recompute_ms, best, 1e-9);
    replayed += plan.predicted.replayed_nodes > 0;
  }
  EXPECT_GE(replayed, 3);  // the budgets made it replay
}

}  // namespace
}  // namespace remat::scheduler
