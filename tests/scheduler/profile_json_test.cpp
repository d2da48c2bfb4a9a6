// A graph's profile saved as JSON and read back (scheduler/profile_json.h):
// every field survives, the same saved profile gives the identical plan
// every time it is read, and malformed or edited files are errors that say
// what is wrong.
#include "scheduler/profile_json.h"
#include "scheduler/profiler.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "nn/gpt.h"
#include "ops/ops.h"
#include "scheduler/plan.h"
#include "tests/support/errors.h"
#include "tests/support/plans.h"

namespace remat::scheduler {
namespace {

// A profile of a small GPT's step with dropout (views, layer norms with
// side results, constants made between nodes, early releases).
GraphProfile gpt_profile() {
  Profiling profiling;  // measure the graph recorded here
  nn::GPT model(nn::GPTConfig{.vocab_size = 13, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16,
                              .dropout = 0.1, .seed = 4});
  Generator g(5);
  Tensor ids, targets;
  {
    CategoryGuard data(MemoryCategory::Data);
    ids = randint(13, {2, 8}, g);
    targets = randint(13, {2, 8}, g);
  }
  const Tensor loss = model.forward(ids, targets).loss;
  loss.backward();
  return profile_graph(loss);
}

TEST(ProfileJson, ARoundTripKeepsEveryField) {
  const GraphProfile graph = gpt_profile();
  const std::string text = profile_to_json(graph);
  const GraphProfile back = profile_from_json(text);
  EXPECT_EQ(profile_to_json(back), text);
  EXPECT_EQ(back.signature, graph.signature);
  ASSERT_EQ(back.nodes.size(), graph.nodes.size());
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    const NodeProfile& a = graph.nodes[v];
    const NodeProfile& b = back.nodes[v];
    EXPECT_EQ(a.op, b.op);
    EXPECT_EQ(a.inputs, b.inputs);
    EXPECT_EQ(a.outside, b.outside);
    EXPECT_EQ(a.saved, b.saved);
    EXPECT_EQ(a.grad_bytes, b.grad_bytes);
    EXPECT_EQ(a.forward_ms, b.forward_ms);  // every digit
    EXPECT_EQ(a.replay_ms, b.replay_ms);
    EXPECT_EQ(a.backward_peak_bytes, b.backward_peak_bytes);
    EXPECT_EQ(a.block, b.block);
  }
  EXPECT_EQ(simulate(back, std::vector<Tag>(back.nodes.size(), Tag::Recompute)).peak_bytes,
            simulate(graph, std::vector<Tag>(graph.nodes.size(), Tag::Recompute)).peak_bytes);
}

// The same saved profile, read ten times, plans identically under every
// policy (and cost, chain and auto at a budget between the minimum and
// keep-all's peak): the plan is reproducible on any run or machine.
TEST(ProfileJson, TheSameSavedProfileGivesTheSamePlanEveryTime) {
  const std::string text = profile_to_json(gpt_profile());
  const GraphProfile first = profile_from_json(text);
  const int64_t budget = (minimum_budget(first) + make_plan(first, {.policy = "none"}).predicted.peak_bytes) / 2;
  std::vector<PlanOptions> options;
  for (const std::string& policy : policy_names()) {
    if (policy != "dtr") options.push_back(testing::options_of(policy));  // dtr plans nothing
  }
  options.push_back({.policy = "cost", .budget = budget});
  options.push_back({.policy = "chain", .budget = budget});
  options.push_back({.policy = "auto", .budget = budget});
  std::vector<Plan> expected;
  for (const PlanOptions& o : options) expected.push_back(make_plan(first, o));
  for (int run = 0; run < 10; ++run) {
    const GraphProfile graph = profile_from_json(text);
    for (size_t i = 0; i < options.size(); ++i) {
      const Plan plan = make_plan(graph, options[i]);
      EXPECT_EQ(plan.tags, expected[i].tags) << options[i].policy << ", run " << run;
      EXPECT_EQ(plan.predicted.peak_bytes, expected[i].predicted.peak_bytes) << options[i].policy;
      EXPECT_EQ(plan.predicted.recompute_ms, expected[i].predicted.recompute_ms) << options[i].policy;
      EXPECT_EQ(plan.minimum_budget_bytes, expected[i].minimum_budget_bytes) << options[i].policy;
    }
  }
}

TEST(ProfileJson, AFileRoundTripsAndAMissingOneNamesItsPath) {
  const GraphProfile graph = gpt_profile();
  const std::string path = (std::filesystem::temp_directory_path() / "remat_profile_json_test.json").string();
  save_profile(graph, path);
  EXPECT_EQ(profile_to_json(load_profile(path)), profile_to_json(graph));
  std::filesystem::remove(path);
  EXPECT_TRUE(testing::contains(testing::error_of([&] { load_profile(path); }), path));
}

// A save on a full disk truncated the good profile in place; now it stands
// byte for byte, and the error names the file and ENOSPC.
TEST(ProfileJson, ASaveThatFailsLeavesTheOldProfile) {
  const GraphProfile graph = gpt_profile();
  const std::string path = (std::filesystem::temp_directory_path() / "remat_profile_json_full.json").string();
  std::ofstream(path) << "{\"an\": \"old profile\"}";
  ::setenv("REMAT_FAULT_WRITE", "ENOSPC:remat_profile_json_full.json:1000", 1);
  const std::string message = testing::error_of([&] { save_profile(graph, path); });
  ::unsetenv("REMAT_FAULT_WRITE");
  EXPECT_TRUE(testing::contains(message, "cannot write '" + path + "'")) << message;
  EXPECT_TRUE(testing::contains(message, "(ENOSPC)")) << message;
  std::ifstream in(path);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()),
            "{\"an\": \"old profile\"}");
  std::filesystem::remove(path);
}

// `edit` applied to the saved JSON of gpt_profile(), then read back.
std::string error_after(const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json json = nlohmann::json::parse(profile_to_json(gpt_profile()));
  edit(json);
  return testing::error_of([&] { profile_from_json(json.dump()); });
}

TEST(ProfileJson, MalformedOrEditedProfilesAreErrorsThatSayWhat) {
  EXPECT_TRUE(testing::contains(testing::error_of([] { profile_from_json("{not json"); }), "not JSON"));
  // A number past double's range is nlohmann's out_of_range, not a parse
  // error: the profile fuzzer found it escaping as a foreign exception.
  EXPECT_TRUE(testing::contains(testing::error_of([] { profile_from_json("{\"flops\": 5E36870912}"); }), "not JSON"));
  EXPECT_TRUE(testing::contains(error_after([](auto& j) { j["format"] = "other"; }), "format 'other'"));
  EXPECT_TRUE(testing::contains(error_after([](auto& j) { j["version"] = 99; }), "version 99"));
  EXPECT_TRUE(testing::contains(error_after([](auto& j) { j["nodes"][3].erase("saved"); }),
                                "node 3 has no field 'saved'"));
  EXPECT_TRUE(testing::contains(error_after([](auto& j) { j["nodes"][2]["output_bytes"] = "many"; }),
                                "field 'output_bytes' of node 2"));
  EXPECT_TRUE(testing::contains(error_after([](auto& j) { j["nodes"][2]["inputs"][0] = 7; }), "input 0 of node 2 is 7"));
  EXPECT_TRUE(testing::contains(error_after([](auto& j) { j["nodes"][1]["forward_ms"] = -1.0; }),
                                "a time is finite and >= 0"));
  EXPECT_TRUE(testing::contains(error_after([](auto& j) { j["nodes"][1]["output_dtype"] = "int8"; }), "dtype 'int8'"));
  EXPECT_TRUE(testing::contains(error_after([](auto& j) { j["nodes"][1]["output_shape"][0] = 3; }),
                                "does not match its nodes"));
  EXPECT_TRUE(testing::contains(error_after([](auto& j) { j["nodes"] = nlohmann::json::array(); }), "no nodes"));
}

}  // namespace
}  // namespace remat::scheduler
