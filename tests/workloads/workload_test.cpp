// W1 as `remat bench` runs it: the memory figures are exact sums of known
// tensor sizes, and training steps lower the loss.
#include "workloads/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "nn/gpt2_pretrained.h"
#include "scheduler/policies/policy.h"
#include "scheduler/profile_json.h"

namespace remat::workloads {
namespace {

TEST(WorkloadSlow, W1MemoryFiguresAreExact) {
  const WorkloadReport report = run_workload({.workload = "W1", .steps = 2, .warmup = 1});
  constexpr int64_t kMiB = 1024 * 1024;
  // After forward: the batch (256 x 1024 float32 = 1 MiB) and the 15 ReLU
  // outputs that the next Linear and the ReLU backward read (1 MiB each),
  // the int64 labels (2 KiB), the logits that cross-entropy saves (10 KiB)
  // with its two statistics a row (2 KiB; no log-probabilities), and the
  // loss (4 bytes).
  EXPECT_EQ(report.saved_bytes_after_forward, 16 * kMiB + 2048 + 10240 + 2048 + 4);
  // Backward's peak is at the 15th Linear: 14 saved ReLU outputs, the
  // incoming gradient, dx and dW (4 MiB) -- 20 MiB plus small tensors.
  EXPECT_GE(report.peak_activation_bytes, 20 * kMiB);
  EXPECT_LT(report.peak_activation_bytes, 20 * kMiB + 64 * 1024);
  EXPECT_EQ(report.parameters, 15754250);
  EXPECT_LT(report.loss_last, report.loss_first);
  EXPECT_EQ(report.recompute_flops, 0);
  // The simulator's figure for the same step, within 2% of the allocator's.
  ASSERT_TRUE(report.predicted_peak_activation_bytes.has_value());
  EXPECT_NEAR(static_cast<double>(*report.predicted_peak_activation_bytes),
              static_cast<double>(report.peak_activation_bytes), 0.02 * report.peak_activation_bytes);
}

TEST(WorkloadSlow, W2StaysWithinPyTorchsMemory) {
  const WorkloadReport report = run_workload({.workload = "W2", .steps = 1, .warmup = 1});
  EXPECT_EQ(report.parameters, 4902912);
  // PyTorch 1.13's figures for W2 keep-all in docs/workloads.md: 222.3 MiB saved
  // for backward, 227.2 MiB step peak.
  constexpr double kMiB = 1024.0 * 1024.0;
  EXPECT_LE(report.saved_bytes_after_forward / kMiB, 222.3);
  EXPECT_LE(report.peak_activation_bytes / kMiB, 227.2);
  EXPECT_LT(report.loss_last, report.loss_first);
}

TEST(WorkloadSlow, W2PerBlockDropsMostBytesAndKeepsTheLoss) {
  const WorkloadReport none = run_workload({.workload = "W2", .steps = 1, .warmup = 1});
  const WorkloadReport blocks = run_workload({.workload = "W2", .policy = "blocks", .steps = 1, .warmup = 1});
  EXPECT_EQ(blocks.loss_first, none.loss_first);
  EXPECT_EQ(blocks.loss_last, none.loss_last);  // same updates: bit-identical gradients
  // Six 2 MiB block inputs and little else stay after forward (under an
  // eighth of keep-all's 150 MiB, which the fused attention and MLP keep
  // small themselves); backward holds one block's rebuilt activations at a
  // time.
  EXPECT_LT(blocks.saved_bytes_after_forward * 8, none.saved_bytes_after_forward);
  EXPECT_LT(blocks.peak_activation_bytes * 3, none.peak_activation_bytes);
  EXPECT_GT(blocks.recompute_flops, 0);
  EXPECT_EQ(none.recompute_flops, 0);
}

TEST(WorkloadSlow, APairedRunStepsTwoCopiesAlternatelyAndComparesThem) {
  const WorkloadOptions options{.workload = "W1", .policy = "sqrt", .steps = 3, .warmup = 1};
  const PairedReport paired = run_paired_workload(options, "none");
  const WorkloadReport alone = run_workload({.workload = "W1", .steps = 3, .warmup = 1});
  EXPECT_EQ(paired.report.policy, "sqrt");
  EXPECT_EQ(paired.baseline.policy, "none");
  ASSERT_EQ(paired.time_ratios.size(), 3u);
  for (double ratio : paired.time_ratios) EXPECT_GT(ratio, 0.0);
  // The copies do not disturb each other's figures or updates.
  EXPECT_EQ(paired.baseline.peak_activation_bytes, alone.peak_activation_bytes);
  EXPECT_EQ(paired.baseline.loss_last, alone.loss_last);
  EXPECT_EQ(paired.report.loss_last, alone.loss_last);  // bit-identical gradients under sqrt
  EXPECT_LT(paired.report.peak_activation_bytes, paired.baseline.peak_activation_bytes);
  const nlohmann::ordered_json j = paired.to_json();
  EXPECT_EQ(j["against_policy"], "none");
  EXPECT_EQ(j["time_vs_against"].size(), 3u);
  // Three pairs: the whole range, covering the median with probability 3/4.
  const auto ratios = paired.time_ratios;
  EXPECT_EQ(j["time_vs_against_median_interval"]["low"], *std::min_element(ratios.begin(), ratios.end()));
  EXPECT_EQ(j["time_vs_against_median_interval"]["high"], *std::max_element(ratios.begin(), ratios.end()));
  EXPECT_DOUBLE_EQ(j["time_vs_against_median_interval"]["coverage"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["peak_vs_against"].get<double>(), static_cast<double>(paired.report.peak_activation_bytes) /
                                                           static_cast<double>(alone.peak_activation_bytes));
  // The phases fit in the step, and the breakdown's replays are sqrt's:
  // keep-all replays nothing.
  for (const WorkloadReport* r : {&paired.report, &paired.baseline}) {
    EXPECT_GT(r->forward_ms_median, 0.0);
    EXPECT_GT(r->backward_ms_median, 0.0);
    EXPECT_LE(r->forward_ms_median + r->backward_ms_median, r->step_ms_max);
  }
  EXPECT_GT(paired.overhead.replays_ms, 0.0);
  EXPECT_EQ(j["overhead_ms_median"]["replays"].get<double>(), paired.overhead.replays_ms);
  // Both plans were priced: sqrt's replays, and keep-all's none.
  ASSERT_TRUE(paired.report.predicted_recompute_ms && paired.report.planned_step_ms);
  EXPECT_GT(*paired.report.predicted_recompute_ms, 0.0);
  ASSERT_TRUE(paired.baseline.predicted_recompute_ms);
  EXPECT_EQ(*paired.baseline.predicted_recompute_ms, 0.0);
  EXPECT_GT(*paired.report.planned_step_ms, 0.0);
  EXPECT_EQ(j["predicted_recompute_ms"].get<double>(), *paired.report.predicted_recompute_ms);
  EXPECT_THROW(run_paired_workload(options, "keep-all"), Error);
}

// A plan made from a saved profile is the same on every run: cost without
// a budget (whose plan follows measured times) gives, run after run, the
// profile's plan, and explain's plan_workload makes it without running.
TEST(WorkloadSlow, ASavedProfileGivesTheSamePlanOnEveryRun) {
  const std::string profile = (std::filesystem::temp_directory_path() / "remat_w1_profile.json").string();
  std::filesystem::remove(profile);
  run_workload({.workload = "W1", .policy = "cost", .steps = 1, .warmup = 1, .save_profile_path = profile});
  const scheduler::GraphProfile saved = scheduler::load_profile(profile);
  const scheduler::Plan expected = scheduler::make_plan(saved, {.policy = "cost"});
  ASSERT_GT(expected.dropped_bytes, 0);  // a plan that replays something
  for (int run = 0; run < 2; ++run) {
    const WorkloadReport report =
        run_workload({.workload = "W1", .policy = "cost", .steps = 2, .warmup = 1, .profile_path = profile});
    EXPECT_EQ(report.profile, profile);
    EXPECT_EQ(report.kept_bytes, expected.kept_bytes) << "run " << run;
    EXPECT_EQ(report.dropped_bytes, expected.dropped_bytes) << "run " << run;
    EXPECT_EQ(report.predicted_peak_activation_bytes, expected.predicted.peak_bytes) << "run " << run;
    EXPECT_NEAR(static_cast<double>(report.peak_activation_bytes), static_cast<double>(expected.predicted.peak_bytes),
                0.02 * static_cast<double>(expected.predicted.peak_bytes)) << "run " << run;
  }
  const WorkloadPlan planned = plan_workload({.workload = "W1", .policy = "cost", .profile_path = profile});
  EXPECT_EQ(planned.plan.tags, expected.tags);
  // The profile of another graph is refused, naming the file.
  const std::string message = [&] {
    try {
      run_workload({.workload = "W2", .policy = "cost", .steps = 1, .warmup = 0, .profile_path = profile});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  }();
  EXPECT_NE(message.find("--profile '" + profile + "' is the profile of another graph"), std::string::npos) << message;
}

// A model of one's own, by its sizes or as a Hugging Face folder: it runs
// under every policy with the same loss, and its report names it.
TEST(Workload, AModelOfOnesOwnRunsUnderEveryPolicyAndIsNamed) {
  ModelSpec gpt{.kind = "gpt", .gpt = {.vocab_size = 32, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 16,
                                       .dropout = 0.1, .tie_weights = true}, .batch_size = 4};
  const WorkloadReport plain = run_workload({.policy = "none", .steps = 2, .warmup = 1, .model = gpt});
  EXPECT_EQ(plain.workload, "gpt 2x16 h2 T16 V32 tied dropout 0.1 B4");
  EXPECT_EQ(plain.parameters, nn::GPT(gpt.gpt).num_parameters());
  for (const std::string policy : {"blocks", "sqrt", "cost", "auto"}) {
    const WorkloadReport report = run_workload({.policy = policy, .steps = 2, .warmup = 1, .model = gpt});
    EXPECT_EQ(report.loss_last, plain.loss_last) << policy;  // bit for bit, dropout included
    if (policy == "blocks") {
      EXPECT_GT(report.dropped_bytes, 0);  // it replays inside each block
    }
  }
  // At half of keep-all's peak (without a budget chain and milp keep all,
  // and dtr needs one).
  for (const std::string policy : {"chain", "milp", "dtr"}) {
    const WorkloadReport report =
        run_workload({.policy = policy, .budget_fraction = 0.5, .steps = 2, .warmup = 1, .model = gpt});
    EXPECT_EQ(report.loss_last, plain.loss_last) << policy;
    EXPECT_EQ(report.over_budget_allocations, 0) << policy;
    EXPECT_LE(report.peak_activation_bytes, *report.budget) << policy;
  }
  const ModelSpec mlp{.kind = "mlp", .dims = {8, 16, 4}, .batch_size = 4};
  const WorkloadReport small = run_workload({.policy = "cost", .steps = 1, .warmup = 1, .model = mlp});
  EXPECT_EQ(small.workload, "mlp 8-16-4 B4");
  EXPECT_EQ(small.parameters, 8 * 16 + 16 + 16 * 4 + 4);

  const std::string dir = (std::filesystem::temp_directory_path() / "remat_workload_hf").string();
  std::filesystem::remove_all(dir);
  gpt.gpt.seed = 11;
  nn::save_gpt2_pretrained(nn::GPT(gpt.gpt), dir);
  const WorkloadReport hf = run_workload({.policy = "blocks", .steps = 1, .warmup = 1,
                                          .model = {.kind = "hf", .hf_dir = dir, .batch_size = 4}});
  EXPECT_EQ(hf.workload, "hf " + dir + " B4");
  EXPECT_EQ(hf.parameters, plain.parameters);
  // The folder's weights, not a fresh initialisation from the run's seed.
  EXPECT_NE(hf.loss_first, plain.loss_first);
}

// An MLP of 8 hidden layers at batch 256 (128 KiB a value): dtr at half of
// keep-all's measured peak (bench --budget 50%) keeps to it from the first
// step, evicts and rebuilds, and trains as keep-all does, bit for bit.
TEST(Workload, DtrRunsAtAShareOfKeepAllsPeakAndCountsItsEvictions) {
  const ModelSpec mlp{.kind = "mlp", .dims = {32, 128, 128, 128, 128, 128, 128, 128, 128, 10}, .batch_size = 256};
  const WorkloadReport keep_all = run_workload({.policy = "none", .steps = 2, .warmup = 1, .model = mlp});
  const WorkloadReport dtr =
      run_workload({.policy = "dtr", .budget_fraction = 0.5, .steps = 2, .warmup = 1, .model = mlp});
  ASSERT_TRUE(dtr.keep_all_peak_activation_bytes.has_value());
  ASSERT_TRUE(dtr.budget.has_value());
  EXPECT_EQ(*dtr.budget, std::llround(0.5 * static_cast<double>(*dtr.keep_all_peak_activation_bytes)));
  EXPECT_EQ(*dtr.keep_all_peak_activation_bytes, keep_all.peak_activation_bytes);
  EXPECT_LE(dtr.peak_activation_bytes, *dtr.budget);
  EXPECT_LE(dtr.first_step_peak_activation_bytes, *dtr.budget);
  EXPECT_EQ(dtr.over_budget_allocations, 0);
  EXPECT_GT(dtr.evictions, 0);
  EXPECT_GT(dtr.rebuilds, 0);
  EXPECT_EQ(dtr.replayed_nodes, dtr.rebuilds);
  EXPECT_GT(dtr.recompute_flops, 0);
  EXPECT_EQ(dtr.loss_first, keep_all.loss_first);
  EXPECT_EQ(dtr.loss_last, keep_all.loss_last);
  const auto json = dtr.to_json();
  EXPECT_EQ(json["evictions"], dtr.evictions);
  EXPECT_EQ(json["keep_all_peak_activation_bytes"], keep_all.peak_activation_bytes);
  EXPECT_FALSE(keep_all.to_json().contains("evictions"));
}

TEST(Workload, AModelOfOnesOwnWithBadSizesIsAnErrorNamingThem) {
  const auto message = [](const ModelSpec& spec) {
    try {
      run_workload({.steps = 1, .warmup = 0, .model = spec});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  ModelSpec gpt{.kind = "gpt"};
  gpt.gpt.n_embd = 10;
  gpt.gpt.n_head = 3;
  EXPECT_NE(message(gpt).find("--n-embd 10 must be a multiple of --n-head 3"), std::string::npos) << message(gpt);
  EXPECT_NE(message({.kind = "mlp", .dims = {5}}).find("at least an input and an output width"), std::string::npos);
  EXPECT_NE(message({.kind = "mlp", .batch_size = 0}).find("--batch-size must be at least 1"), std::string::npos);
  EXPECT_NE(message({.kind = "hf", .hf_dir = "/nonexistent/gpt2"}).find("cannot be read"), std::string::npos);
}

TEST(Workload, UnknownNamesAreErrors) {
  EXPECT_THROW(run_workload({.workload = "W7"}), Error);
  EXPECT_THROW(run_workload({.policy = "sqrtt"}), Error);
  EXPECT_THROW(run_workload({.threads = 0}), Error);
}

// Outputs are checked before the steps run: a --trace whose folder is
// missing is an error naming the flag and the folder, not one after them.
TEST(Workload, AnOutputThatCannotBeWrittenIsAnErrorBeforeTheSteps) {
  try {
    run_workload({.workload = "W1", .steps = 1, .warmup = 0, .trace_path = "/nonexistent-remat/trace.json"});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("--trace '/nonexistent-remat/trace.json'"), std::string::npos) << message;
    EXPECT_NE(message.find("'/nonexistent-remat' does not exist"), std::string::npos) << message;
  }
}

// explain --device meta: the workload's step rehearsed on the meta device,
// nothing run; its graph is the real step's (signature, nodes, keep-all
// peak) and its plan fits the budget a share of keep-all's peak gives.
TEST(Workload, OnTheMetaDeviceAWorkloadIsPlannedWithoutRunning) {
  WorkloadOptions options{.policy = "none", .warmup = 1};
  options.model.kind = "gpt";
  options.model.gpt = {.vocab_size = 64, .block_size = 16, .n_layer = 3, .n_head = 2, .n_embd = 32};
  options.model.batch_size = 2;
  const WorkloadPlan real = plan_workload(options);
  options.device = "meta";
  const WorkloadPlan rehearsed = plan_workload(options);
  EXPECT_EQ(rehearsed.graph.signature, real.graph.signature);
  EXPECT_EQ(rehearsed.graph.size(), real.graph.size());
  EXPECT_EQ(rehearsed.plan.predicted.peak_bytes, real.plan.predicted.peak_bytes);
  options.policy = "chain";
  options.budget_fraction = 0.5;
  const WorkloadPlan halved = plan_workload(options);
  ASSERT_TRUE(halved.plan.budget.has_value());
  EXPECT_EQ(*halved.plan.budget, std::llround(0.5 * static_cast<double>(real.plan.predicted.peak_bytes)));
  EXPECT_LE(halved.plan.predicted.peak_bytes, *halved.plan.budget);
  EXPECT_GT(halved.plan.planning_ms, 0);
  // The share is resolved by planning keep-all first: the graph's
  // least-memory search runs for it, and the policy's plan reuses it
  // (Note [Least-memory plans remembered]).
  scheduler::policies::forget_least_memory_plans();
  const int64_t searches = scheduler::policies::least_memory_searches();
  EXPECT_EQ(plan_workload(options).plan.tags, halved.plan.tags);
  EXPECT_EQ(scheduler::policies::least_memory_searches(), searches + 1);
  // bench runs nothing on the meta device: no loss to report.
  EXPECT_THROW(run_workload(options), Error);
}

}  // namespace
}  // namespace remat::workloads

