// The Llama workloads of `remat bench` and `explain`: W4 builds and steps
// with bench/torch_llama.py's sizes, a --model llama runs every policy to
// the same weights, a Llama built on the meta device rehearses the real
// step's graph, and --hf reads a Llama folder.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "engine/allocator.h"
#include "nn/llama.h"
#include "nn/llama_pretrained.h"
#include "workloads/workload.h"
#include "workloads/workload_build.h"

namespace remat::workloads {
namespace {

// A Llama of a few thousand parameters, for runs that take milliseconds.
ModelSpec tiny_llama() {
  ModelSpec spec;
  spec.kind = "llama";
  spec.llama = {.vocab_size = 11, .hidden_size = 16, .intermediate_size = 24, .num_hidden_layers = 2,
                .num_attention_heads = 4, .num_key_value_heads = 2, .max_position_embeddings = 8,
                .rope_theta = 10000.0, .rms_norm_eps = 1e-5};
  spec.batch_size = 2;
  return spec;
}

TEST(LlamaWorkload, DescribeNamesEverySize) {
  EXPECT_EQ(describe(llama_workload("W4"), ""), "llama 6x384 h6 kv2 ff1024 T256 V65 untied B8");
  EXPECT_EQ(describe(llama_workload("W5"), ""), "llama 16x2048 h32 kv8 ff8192 T2048 V128256 theta 500000 tied B4");
  EXPECT_THROW(llama_workload("W2"), Error);
}

// W4: bench/torch_llama.py's W4 (9.49 M parameters, AdamW lr 3e-4),
// one step; its first loss is about ln 65 (random tokens, small weights).
TEST(LlamaWorkload, W4BuildsAndSteps) {
  const Workload w4 = build_workload({.workload = "W4"});
  EXPECT_EQ(w4.model->num_parameters(), 9492096);
  EXPECT_TRUE(w4.adamw);
  EXPECT_DOUBLE_EQ(w4.lr, 3e-4);
  const WorkloadReport report = run_workload({.workload = "W4", .steps = 1, .warmup = 0});
  EXPECT_EQ(report.workload, "W4");
  EXPECT_EQ(report.parameters, 9492096);
  EXPECT_NEAR(report.loss_first, std::log(65.0), 0.3);
  EXPECT_GT(report.peak_activation_bytes, 0);
}

// Every policy replays the values it dropped exactly: the weights after
// two AdamW steps are the same bits as keep-all's.
TEST(LlamaWorkload, EveryPolicyGivesKeepAllsWeights) {
  WorkloadOptions options{.policy = "none", .steps = 2, .warmup = 0};
  options.model = tiny_llama();
  const WorkloadReport none = run_workload(options);
  EXPECT_LT(none.loss_last, none.loss_first);
  for (const char* policy : {"blocks", "sqrt", "cost", "chain", "auto"}) {
    options.policy = policy;
    if (scheduler::takes_budget(policy)) options.budget_fraction = 0.5;
    const WorkloadReport report = run_workload(options);
    EXPECT_EQ(report.weights_digest, none.weights_digest) << policy;
    EXPECT_GT(report.dropped_bytes, 0) << policy;
    options.budget_fraction.reset();
  }
}

// Built on the meta device (explain --device meta), a Llama holds no
// values, yet its rehearsal records the real step's graph.
TEST(LlamaWorkload, OnTheMetaDeviceItsGraphIsTheRealSteps) {
  WorkloadOptions options{.policy = "none", .warmup = 1};
  options.model = tiny_llama();
  const WorkloadPlan real = plan_workload(options);
  options.device = "meta";
  const WorkloadPlan rehearsed = plan_workload(options);
  EXPECT_EQ(rehearsed.graph.signature, real.graph.signature);
  EXPECT_EQ(rehearsed.plan.predicted.peak_bytes, real.plan.predicted.peak_bytes);
  const Workload meta = build_workload(options, /*rehearsal=*/true);
  for (const Tensor& p : meta.model->parameters()) EXPECT_TRUE(p.device().is_meta());
}

// W5 (1.24 B parameters, 4.9 GB of float32) plans on the meta device
// without those bytes: the CPU's allocator does not rise by them.
TEST(LlamaWorkload, W5PlansOnTheMetaDeviceWithoutItsBytes) {
  const int64_t before = allocator_for(Device::cpu()).stats().live_total;
  const WorkloadPlan plan =
      plan_workload({.workload = "W5", .policy = "chain", .budget_fraction = 0.5, .device = "meta"});
  EXPECT_LT(allocator_for(Device::cpu()).stats().live_total - before, int64_t{64} << 20);
  ASSERT_TRUE(plan.plan.budget.has_value());
  EXPECT_LE(plan.plan.predicted.peak_bytes, *plan.plan.budget);
  EXPECT_GT(plan.plan.dropped_bytes, 0);
  // On the CPU it is a GPU workload.
  EXPECT_THROW(build_workload({.workload = "W5"}), Error);
}

// --hf with a Llama folder: the folder's model, the same run as the
// --model llama it was saved from.
TEST(LlamaWorkload, AHuggingFaceLlamaFolderIsRead) {
  const std::string folder = (std::filesystem::temp_directory_path() / "remat_llama_workload_hf").string();
  std::filesystem::remove_all(folder);
  ModelSpec spec = tiny_llama();
  nn::LlamaConfig config = spec.llama;
  config.seed = 0;
  nn::save_llama_pretrained(nn::Llama(config), folder);
  WorkloadOptions options{.policy = "none", .steps = 1, .warmup = 0};
  options.model = spec;
  const WorkloadReport built = run_workload(options);
  options.model.kind = "hf";
  options.model.hf_dir = folder;
  const WorkloadReport loaded = run_workload(options);
  EXPECT_EQ(loaded.workload, "hf " + folder + " B2");
  EXPECT_EQ(loaded.parameters, built.parameters);
  EXPECT_EQ(loaded.loss_first, built.loss_first);
  EXPECT_EQ(loaded.weights_digest, built.weights_digest);
  options.model.attention = nn::AttentionPath::Explicit;
  EXPECT_THROW(run_workload(options), Error);
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace remat::workloads
