// Repeated blocks solved once (scheduler/repeated_blocks.h; Note [Repeated
// blocks solved once] in scheduler/policies/milp.cpp) and planned apart
// (Note [Blocks planned apart] in policies/milp_blocks.cpp): on GPT graphs
// taken from a rehearsal on the meta device, every block but the last is
// the first's twin, node for node; milp's program over the tied blocks
// gives a plan within its budget, no faster than the whole graph's proven
// optimum (as fast as it at 80% of keep-all's peak on a GPT of 3 blocks,
// dearer at 90%, where blocks planned apart find the whole graph's
// optimum), and says which space its bound is over.
#include "scheduler/repeated_blocks.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "nn/gpt.h"
#include "ops/ops.h"
#include "scheduler/checkpointer.h"
#include "scheduler/policies/milp.h"
#include "scheduler/policies/milp_blocks.h"
#include "scheduler/policies/policy.h"
#include "tests/support/errors.h"

namespace remat::scheduler {
namespace {

// The graph of a GPT step of these sizes, rehearsed on the meta device
// (nothing computed), with the roofline clock's nominal times.
GraphProfile rehearsed_gpt(int64_t n_layer, int64_t n_embd, int64_t block_size, int64_t batch) {
  // GPT-2's explicit attention and MLP: the graph whose twins near
  // keep-all's peak are best planned apart (the test below).
  auto model = std::make_shared<nn::GPT>(nn::GPTConfig{.vocab_size = 64, .block_size = block_size,
                                                       .n_layer = n_layer, .n_head = 2, .n_embd = n_embd,
                                                       .dropout = 0.0, .seed = 4,
                                                       .attention = nn::AttentionPath::Explicit,
                                                       .mlp = nn::MlpPath::Explicit});
  Generator g(5);
  Tensor ids, targets;
  {
    CategoryGuard data(MemoryCategory::Data);
    ids = randint(64, {batch, block_size}, g);
    targets = randint(64, {batch, block_size}, g);
  }
  Checkpointer checkpointer({.policy = "none"});
  checkpointer.rehearse([&] {
    Tensor loss;
    {
      const auto recording = checkpointer.record();
      loss = model->forward(ids, targets).loss;
    }
    loss.backward();
  });
  EXPECT_NE(checkpointer.profile(), nullptr);
  return search::roofline_times(*checkpointer.profile());
}

TEST(RepeatedBlocks, EveryBlockButTheLastIsTheFirstsTwin) {
  for (const int64_t n_layer : {2, 4, 6}) {
    const GraphProfile graph = rehearsed_gpt(n_layer, 32, 16, 2);
    const search::Context c(graph, {});
    const RepeatedBlocks repeats = repeated_blocks(c);
    EXPECT_EQ(repeats.blocks, n_layer);
    // The caller holds a block's output until the next block's is made; the
    // last block's goes at the final norm: that block is a kind of its own.
    EXPECT_EQ(repeats.repeats, n_layer - 2) << n_layer << " blocks";
    EXPECT_EQ(repeats.kinds, n_layer > 2 ? 1 : 0);
    int64_t first = -1, twins = 0;
    for (int64_t v = 0; v < graph.size(); ++v) {
      if (first < 0 && graph.nodes[v].block == "transformer.h.0") first = v;
      const int64_t twin = repeats.twin_of[v];
      if (twin < 0) continue;
      ++twins;
      // Block k's node at offset o is block 0's at offset o: same op, shape, bytes.
      EXPECT_EQ(graph.nodes[twin].block, "transformer.h.0");
      EXPECT_EQ(graph.nodes[twin].op, graph.nodes[v].op);
      EXPECT_EQ(graph.nodes[twin].output_shape, graph.nodes[v].output_shape);
      EXPECT_EQ(graph.nodes[twin].output_bytes, graph.nodes[v].output_bytes);
      EXPECT_NE(graph.nodes[v].block, "transformer.h.0");
      EXPECT_NE(graph.nodes[v].block, "transformer.h." + std::to_string(n_layer - 1));
    }
    ASSERT_GE(first, 0);
    int64_t block_nodes = 0;
    for (const NodeProfile& node : graph.nodes) block_nodes += node.block == "transformer.h.0" ? 1 : 0;
    EXPECT_EQ(twins, repeats.repeats * block_nodes);
  }
}

TEST(RepeatedBlocks, NoneInAGptOfOneBlock) {
  const GraphProfile one = rehearsed_gpt(1, 32, 16, 2);
  const RepeatedBlocks repeats = repeated_blocks(search::Context(one, {}));
  EXPECT_EQ(repeats.blocks, 1);
  EXPECT_FALSE(repeats.any());
  for (int64_t twin : repeats.twin_of) EXPECT_EQ(twin, -1);
}

// milp on a GPT of 3 blocks (one twin) at `share` of keep-all's peak, with
// its blocks decided once and over the whole graph (exact here): both plans
// fit, and the tied plan is no faster than the whole graph's optimum.
struct Solves {
  std::optional<MilpSolution> whole, once, tied;  // tied: the program alone, from keep-all
  double whole_ms = 0;
};
Solves solve_both(const search::Context& c, double share) {
  const int64_t keep_all = c.simulate(std::vector<Tag>(c.graph.nodes.size(), Tag::Keep)).peak_bytes;
  const auto target = static_cast<int64_t>(share * static_cast<double>(keep_all));
  Solves s{solve_milp(c, target, {.time_limit_s = 20, .blocks_once = false}),
           solve_milp(c, target, {.time_limit_s = 20, .blocks_once = true}),
           solve_milp(c, target, {.time_limit_s = 20, .blocks_once = true, .pooled = false})};
  EXPECT_TRUE(s.whole && s.once && s.tied) << share;
  if (!s.whole || !s.once || !s.tied) return s;
  EXPECT_EQ(s.whole->report.status, "optimal") << "the whole graph's solve is exact here";
  EXPECT_EQ(s.whole->report.space, "every tag");
  EXPECT_NE(s.once->report.space.find("1 repeated blocks"), std::string::npos) << s.once->report.space;
  EXPECT_LE(c.simulate(s.whole->tags).peak_bytes, target);
  EXPECT_LE(c.simulate(s.once->tags).peak_bytes, target);
  EXPECT_DOUBLE_EQ(c.simulate(s.once->tags).recompute_ms, s.once->report.objective_ms);
  EXPECT_LE(s.once->report.bound_ms, s.once->report.objective_ms);
  // Its program has fewer columns: one block's drops for the twins, rows
  // at the last twin's points only.
  EXPECT_LT(s.once->report.variables, s.whole->report.variables);
  s.whole_ms = s.whole->report.objective_ms;
  EXPECT_GE(s.once->report.objective_ms, s.whole_ms - 1e-12);
  EXPECT_GE(s.tied->report.objective_ms, s.once->report.objective_ms - 1e-12) << "it starts from fewer plans";
  EXPECT_EQ(s.tied->report.found_by, "the program") << "not keep-all, the one plan it starts from";
  return s;
}

TEST(RepeatedBlocks, MilpDecidingThemOnceFindsTheWholeGraphsOptimum) {
  const GraphProfile graph = rehearsed_gpt(3, 32, 16, 2);
  const Solves s = solve_both(search::Context(graph, {}), 0.8);
  ASSERT_TRUE(s.whole && s.once);
  EXPECT_EQ(s.once->report.status, "optimal");
  EXPECT_NEAR(s.once->report.objective_ms, s.whole_ms, 1e-9 * s.whole_ms);
}

// Near keep-all's peak the best plan treats the twins apart: the tied
// program's optimum is dearer than the whole graph's, so its bound holds
// over the tied plans only, as SolverReport::space says, not over every
// tag; blocks planned apart, where milp starts, find the whole graph's
// optimum, and the report says where the plan came from.
TEST(RepeatedBlocks, MilpsBoundIsOverTheTiedPlansOnlyAndBlocksPlannedApartFindTheOptimum) {
  const GraphProfile graph = rehearsed_gpt(3, 32, 16, 2);
  const Solves s = solve_both(search::Context(graph, {}), 0.9);
  ASSERT_TRUE(s.whole && s.once && s.tied);
  EXPECT_EQ(s.tied->report.status, "optimal");
  EXPECT_GT(s.tied->report.objective_ms, s.whole_ms * 1.001);
  EXPECT_GT(s.tied->report.bound_ms, s.whole_ms);
  EXPECT_NE(s.tied->report.space, "every tag");
  EXPECT_NEAR(s.once->report.objective_ms, s.whole_ms, 1e-9 * s.whole_ms);
  EXPECT_NE(s.once->report.found_by.find("blocks planned apart"), std::string::npos) << s.once->report.found_by;
  EXPECT_NE(s.once->report.space.find("blocks planned apart"), std::string::npos) << s.once->report.space;
}

// `milp:whole` solves the whole graph's program, untied; another argument
// is an error that says what milp takes.
TEST(RepeatedBlocks, MilpWholeSolvesTheGraphUntiedAndNothingElseFollowsItsColon) {
  const GraphProfile graph = rehearsed_gpt(3, 32, 16, 2);
  const int64_t keep_all = simulate(graph, std::vector<Tag>(graph.nodes.size(), Tag::Keep)).peak_bytes;
  PlanOptions options{.policy = "milp:whole", .budget = keep_all * 8 / 10, .solver_time_limit_s = 20};
  const Plan whole = make_plan(graph, options);
  ASSERT_TRUE(whole.solver.has_value());
  EXPECT_EQ(whole.solver->space, "every tag");
  options.policy = "milp";
  const Plan tied = make_plan(graph, options);
  ASSERT_TRUE(tied.solver.has_value());
  EXPECT_NE(tied.solver->space.find("repeated blocks"), std::string::npos) << tied.solver->space;
  options.policy = "milp:all";
  EXPECT_TRUE(testing::contains(testing::error_of([&] { make_plan(graph, options); }), "milp takes 'whole'"));
}

// Blocks planned apart on a GPT of 6 blocks at half of keep-all's peak:
// one segment per block and one before and after them, CBC planning the
// four that are not twins (block 0, the last block, the embeddings, the
// head); plans simulated as they are, one within the target, and
// milp's plan no slower than any of those that fit.
TEST(RepeatedBlocks, BlocksPlannedApartGiveSegmentsTheirOwnPlans) {
  const GraphProfile graph = rehearsed_gpt(6, 32, 16, 2);
  const search::Context c(graph, {});
  const int64_t keep_all = c.simulate(std::vector<Tag>(graph.nodes.size(), Tag::Keep)).peak_bytes;
  const int64_t target = keep_all / 2;
  const BlocksApart apart = plan_blocks_apart(c, target, repeated_blocks(c), policies::pooled_plans(c), 10);
  EXPECT_EQ(apart.segments, 8);
  EXPECT_EQ(apart.solved, 4);
  EXPECT_GT(apart.solves, 0);
  EXPECT_GE(apart.options, apart.segments);
  ASSERT_FALSE(apart.plans.empty());
  double fastest = 1e300;
  for (const search::Candidate& plan : apart.plans) {
    EXPECT_NE(plan.origin.find("milp: blocks planned apart, chain of"), std::string::npos) << plan.origin;
    if (plan.sim.peak_bytes <= target) fastest = std::min(fastest, plan.sim.recompute_ms);
  }
  EXPECT_LT(fastest, 1e300) << "one of them fits";
  // milp gives blocks planned apart half of its 20 s: the 10 s above.
  const auto milp = solve_milp(c, target, {.time_limit_s = 20});
  ASSERT_TRUE(milp.has_value());
  EXPECT_LE(milp->report.objective_ms, fastest);
  EXPECT_LE(c.simulate(milp->tags).peak_bytes, target);
}

}  // namespace
}  // namespace remat::scheduler
