// The presets (scheduler/policies/presets.cpp): each one's tags are what its
// documentation says on W2's graph (rehearsed on the meta device: shapes
// and bytes, nothing computed) and on a GPT with dropout, the gradients of
// a step under each are bit-identical to keep-all's, each fits a budget
// where it takes one, and a preset that names nothing is an error.
#include <gtest/gtest.h>

#include <algorithm>

#include "nn/gpt.h"
#include "scheduler/checkpointer.h"
#include "scheduler/plan.h"
#include "scheduler/search.h"
#include "tests/support/errors.h"
#include "tests/support/plan_workloads.h"

namespace remat::scheduler {
namespace {

using namespace plan_testing;

// W2's graph (docs/workloads.md), from a rehearsal: nominal times.
GraphProfile w2_graph() {
  nn::GPT model(nn::GPTConfig{.vocab_size = 256, .block_size = 128, .n_layer = 6, .n_head = 4, .n_embd = 256,
                              .tie_weights = false});
  Generator g(1);
  const Tensor ids = as_data([&] { return randint(256, {16, 128}, g); });
  Checkpointer checkpointer({.policy = "blocks"});
  checkpointer.rehearse([&] {
    Tensor loss;
    {
      const auto recording = checkpointer.record();
      loss = model.forward(ids, ids).loss;
    }
    loss.backward();
  });
  return search::roofline_times(*checkpointer.profile());
}

const std::vector<GraphProfile>& graphs() {
  static const std::vector<GraphProfile> both{w2_graph(), run(gpt(), {.policy = "none"}).graph};
  return both;
}

// Nodes whose tag a plan decides: outputs backward reads, not views.
std::vector<int64_t> decided(const GraphProfile& graph) {
  const std::vector<bool> read = read_by_backward(graph);
  std::vector<int64_t> out;
  for (const NodeProfile& node : graph.nodes) {
    if (read[node.position] && node.view_of < 0 && node.output_bytes > 0 && node.position + 1 < graph.size()) {
      out.push_back(node.position);
    }
  }
  return out;
}

TEST(Presets, SaveMatmulsKeepsWhatGemmsMakeAndReplaysTheRest) {
  for (const GraphProfile& graph : graphs()) {
    const Plan plan = make_plan(graph, {.policy = "save-matmuls"});
    for (int64_t v : decided(graph)) {
      const NodeProfile& node = graph.nodes[v];
      EXPECT_EQ(plan.tags[v], node.compute_bound ? Tag::Keep : Tag::Recompute) << node.name;
    }
    EXPECT_TRUE(plan.warnings.empty());
  }
}

TEST(Presets, EveryNBlocksReplaysBlocksZeroNTwoNAndKeepsTheOthers) {
  for (const GraphProfile& graph : graphs()) {
    const Plan plan = make_plan(graph, {.policy = "every-n-blocks:2"});
    const Plan blocks = make_plan(graph, {.policy = "blocks"});
    for (int64_t v : decided(graph)) {
      const std::string& block = graph.nodes[v].block;
      const bool replayed_block = block == "transformer.h.0" || block == "transformer.h.2" || block == "transformer.h.4";
      // In a replayed block as blocks tags it; elsewhere kept.
      EXPECT_EQ(plan.tags[v], replayed_block ? blocks.tags[v] : Tag::Keep) << graph.nodes[v].name;
    }
    EXPECT_LT(plan.dropped_bytes, blocks.dropped_bytes);
    EXPECT_GT(plan.dropped_bytes, 0);
    EXPECT_EQ(make_plan(graph, {.policy = "every-n-blocks:1"}).tags, blocks.tags);
  }
}

TEST(Presets, RecomputeModulesReplaysTheNamedModulesAndKeepsTheRest) {
  for (const GraphProfile& graph : graphs()) {
    const Plan plan = make_plan(graph, {.policy = "recompute-modules:attn,norm"});
    for (int64_t v : decided(graph)) {
      const NodeProfile& node = graph.nodes[v];
      const bool named = testing::contains(node.module, ".attn") || testing::contains(node.module, ".ln_");
      EXPECT_EQ(plan.tags[v], named ? Tag::Recompute : Tag::Keep) << node.name;
    }
  }
}

TEST(Presets, EachFitsABudgetAndTheirStepsAreBitIdenticalToKeepAll) {
  const GraphProfile& graph = graphs()[1];
  const int64_t keep_all = make_plan(graph, {.policy = "none"}).predicted.peak_bytes;
  const int64_t budget = (minimum_budget(graph) + keep_all) / 2;
  const Grads expected = reference(gpt());
  for (const char* preset : {"save-matmuls", "every-n-blocks:3", "every-n-blocks", "recompute-modules:mlp"}) {
    SCOPED_TRACE(preset);
    const Plan plan = make_plan(graph, {.policy = preset, .budget = budget});
    EXPECT_LE(plan.predicted.peak_bytes, budget) << plan.detail;
    const Step step = run(gpt(), {.policy = preset, .budget = budget}, 3);
    EXPECT_EQ(step.grads, expected);
    expect_prediction_holds(step);
    EXPECT_GT(step.report.replayed_nodes, 0);
  }
  for (const char* preset : {"save-matmuls", "every-n-blocks:2", "recompute-modules:attn,mlp,norm"}) {
    SCOPED_TRACE(preset);
    const Step step = run(gpt(), {.policy = preset});
    EXPECT_EQ(step.grads, expected);
    EXPECT_GT(step.report.replayed_nodes, 0);
  }
}

TEST(Presets, APresetThatNamesNothingIsAnErrorThatSaysWhat) {
  const GraphProfile& graph = graphs()[1];
  const std::string typo = testing::error_of([&] { make_plan(graph, {.policy = "recompute-modules:atn,mlp"}); });
  EXPECT_TRUE(testing::contains(typo, "'atn' names no module")) << typo;
  EXPECT_TRUE(testing::contains(typo, "nearest: attn")) << typo;
  const std::string empty = testing::error_of([&] { make_plan(graph, {.policy = "recompute-modules:attn,"}); });
  EXPECT_TRUE(testing::contains(empty, "an empty item")) << empty;
  const std::string zero = testing::error_of([&] { make_plan(graph, {.policy = "every-n-blocks:0"}); });
  EXPECT_TRUE(testing::contains(zero, "every-n-blocks:0")) << zero;
  const std::string none = testing::error_of([&] { make_plan(graph, {.policy = "every-n-blocks"}); });
  EXPECT_TRUE(testing::contains(none, "needs N")) << none;
  const std::string extra = testing::error_of([&] { make_plan(graph, {.policy = "save-matmuls:2"}); });
  EXPECT_TRUE(testing::contains(extra, "takes nothing after a colon")) << extra;
  const Step mlp_step = run(mlp(), {.policy = "none"});
  const std::string blockless = testing::error_of([&] { make_plan(mlp_step.graph, {.policy = "every-n-blocks:2"}); });
  EXPECT_TRUE(testing::contains(blockless, "no blocks")) << blockless;
}

TEST(Presets, AListOfPoliciesKeepsAModuleListsCommasAndChecksEachPolicy) {
  EXPECT_EQ(split_policies("blocks,recompute-modules:attn,mlp,every-n-blocks:2,cost"),
            (std::vector<std::string>{"blocks", "recompute-modules:attn,mlp", "every-n-blocks:2", "cost"}));
  const std::string unknown = testing::error_of([] { split_policies("blocks,atn"); });
  EXPECT_TRUE(testing::contains(unknown, "unknown recompute policy 'atn'")) << unknown;
  const std::string bare = testing::error_of([] { split_policies("cost,recompute-modules"); });
  EXPECT_TRUE(testing::contains(bare, "needs its modules")) << bare;
  EXPECT_TRUE(is_preset("every-n-blocks:2"));
  EXPECT_FALSE(is_preset("cost"));
}

}  // namespace
}  // namespace remat::scheduler
