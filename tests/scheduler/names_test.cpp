// Node names (Note [Node names] in engine/recording.h) and the rules written
// with them (scheduler/rules.h): names are module path and op, the same on
// every run and through a saved profile; rules name ops or glob over names;
// a rule that names nothing, or two rules that disagree, are errors; prefer
// rules give way to a budget and say so; a plan that changes nothing says so
// (Note [Nothing silent] in scheduler/plan.cpp).
#include "scheduler/rules.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "scheduler/plan.h"
#include "scheduler/profile_json.h"
#include "tests/support/errors.h"
#include "tests/support/plan_workloads.h"

namespace remat::scheduler {
namespace {

using namespace plan_testing;

std::vector<std::string> names_of(const GraphProfile& graph) {
  std::vector<std::string> names;
  for (const NodeProfile& node : graph.nodes) names.push_back(node.name);
  return names;
}

const GraphProfile& gpt_graph() {
  static const GraphProfile graph = run(gpt(), {.policy = "none"}).graph;
  return graph;
}

TEST(NodeNames, AreModulePathAndOpTheSameOnEveryRunAndUnique) {
  const std::vector<std::string> names = names_of(gpt_graph());
  EXPECT_EQ(names_of(run(gpt(), {.policy = "none"}).graph), names);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size()) << "names repeat";
  for (const char* expected : {"transformer.wte/embedding", "transformer.h.0.ln_1/layer_norm",
                               "transformer.h.0.attn.c_attn/affine", "transformer.h.1.attn/causal_softmax",
                               "transformer.h.1.attn/matmul", "transformer.h.1.attn/matmul#1",
                               "transformer.h.0.attn.attn_dropout/dropout", "transformer.h.2.mlp.c_fc/affine",
                               "transformer.h.2.mlp/gelu", "transformer.h.2/add#1", "transformer.ln_f/layer_norm",
                               "/cross_entropy"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  for (const NodeProfile& node : gpt_graph().nodes) {
    EXPECT_EQ(node.name.substr(0, node.module.size() + 1), node.module + "/") << node.name;
  }
}

TEST(NodeNames, TravelWithASavedProfileAndAnOlderProfileNamesItsOps) {
  const GraphProfile& graph = gpt_graph();
  EXPECT_EQ(names_of(profile_from_json(profile_to_json(graph))), names_of(graph));
  // A profile saved before nodes had names: no "module" field.
  nlohmann::json old = nlohmann::json::parse(profile_to_json(graph));
  for (nlohmann::json& node : old["nodes"]) {
    node.erase("module");
    node.erase("name");
  }
  const GraphProfile loaded = profile_from_json(old.dump());
  EXPECT_EQ(loaded.nodes.front().name, "/" + graph.nodes.front().op);
  EXPECT_EQ(loaded.signature, graph.signature);
}

TEST(Rules, GlobsMatchNamesOrTheirTailsAndOpsByThemselves) {
  EXPECT_TRUE(glob_match("h.*.attn/*", "h.3.attn/softmax"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("a?c*", "abcdef"));
  EXPECT_FALSE(glob_match("a?c", "ac"));
  EXPECT_FALSE(glob_match("h.*.attn/*", "h.3.attn"));
  NodeProfile node;
  node.op = "matmul";
  node.module = "transformer.h.3.attn";
  node.name = "transformer.h.3.attn/matmul#1";
  for (const char* rule : {"matmul", "mat*", "h.*.attn/*", "h.3.attn/matmul", "h.3.attn/matmul#1",
                           "transformer.h.3.attn/matmul", "attn/matmul", "*/matmul"}) {
    EXPECT_TRUE(names_node(rule, node)) << rule;
  }
  for (const char* rule : {"softmax", "h.3.attn/matmul#2", "ransformer.h.3.attn/*", "h.4.attn/*", "3.attn"}) {
    EXPECT_FALSE(names_node(rule, node)) << rule;
  }
}

TEST(Rules, ANameGlobBindsEveryPolicyAndARuleNamingNothingIsAnErrorWithTheNearestNames) {
  const GraphProfile& graph = gpt_graph();
  const Overrides rules{.must_recompute = {"h.*.attn/causal_softmax"}};
  for (const char* policy : {"none", "blocks", "cost", "auto"}) {
    const Plan plan = make_plan(graph, {.policy = policy, .overrides = rules});
    for (const NodeProfile& node : graph.nodes) {
      if (node.op == "causal_softmax") { EXPECT_EQ(plan.tags[node.position], Tag::Recompute) << policy; }
    }
  }
  const std::string typo =
      testing::error_of([&] { make_plan(graph, {.overrides = {.must_recompute = {"h.*.atn/causal_softmax"}}}); });
  EXPECT_TRUE(testing::contains(typo, "'h.*.atn/causal_softmax'")) << typo;
  EXPECT_TRUE(testing::contains(typo, "attn/causal_softmax")) << typo;  // a nearest name
  const std::string op = testing::error_of([&] { make_plan(graph, {.overrides = {.prefer_keep = {"gelo"}}}); });
  EXPECT_TRUE(testing::contains(op, "prefer-keep rule 'gelo'")) << op;
  EXPECT_TRUE(testing::contains(op, "gelu")) << op;
  const std::string both = testing::error_of(
      [&] { make_plan(graph, {.overrides = {.must_keep = {"gelu"}, .must_recompute = {"h.1.mlp/*"}}}); });
  EXPECT_TRUE(testing::contains(both, "transformer.h.1.mlp/gelu")) << both;
}

TEST(Rules, PreferRulesApplyUnlessTheBudgetFailsThenTheyAreSetAsideAndSaid) {
  const GraphProfile& graph = gpt_graph();
  const Plan plain = make_plan(graph, {.policy = "none", .overrides = {.prefer_recompute = {"gelu"}}});
  for (const NodeProfile& node : graph.nodes) {
    if (node.op == "gelu") { EXPECT_EQ(plain.tags[node.position], Tag::Recompute); }
  }
  EXPECT_TRUE(testing::contains(plain.detail, "prefer rules applied")) << plain.detail;
  // Keeping every matmul's output cannot meet the smallest budget: cost's
  // own plan stands.
  const int64_t budget = minimum_budget(graph);
  const Plan tight = make_plan(graph, {.policy = "cost", .budget = budget,
                                       .overrides = {.prefer_keep = {"affine", "matmul"}}});
  EXPECT_LE(tight.predicted.peak_bytes, budget);
  EXPECT_TRUE(testing::contains(tight.detail, "prefer rules set aside")) << tight.detail;
}

TEST(NothingSilent, APlanThatDropsNothingOrABudgetThatBindsNothingIsSaid) {
  const GraphProfile& graph = gpt_graph();
  EXPECT_TRUE(make_plan(graph, {.policy = "none"}).warnings.empty());
  EXPECT_TRUE(make_plan(graph, {.policy = "blocks"}).warnings.empty());
  const Plan chain = make_plan(graph, {.policy = "chain"});  // no budget: nothing to trade
  ASSERT_EQ(chain.warnings.size(), 1u);
  EXPECT_TRUE(testing::contains(chain.warnings[0], "policy chain drops none")) << chain.warnings[0];
  const int64_t keep_all = make_plan(graph, {.policy = "none"}).predicted.peak_bytes;
  const Plan loose = make_plan(graph, {.policy = "cost", .budget = keep_all + 1});
  EXPECT_TRUE(std::any_of(loose.warnings.begin(), loose.warnings.end(), [](const std::string& w) {
    return testing::contains(w, "at or above keep-all's predicted peak");
  })) << loose.warnings.size();
  // The step's report ends with them.
  const Step step = run(gpt(), {.policy = "chain"});
  EXPECT_TRUE(testing::contains(step.report.str(), "warning: policy chain drops none")) << step.report.str();
}

}  // namespace
}  // namespace remat::scheduler
