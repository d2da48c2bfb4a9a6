// Module::gradient_checkpointing_enable on a GPT with dropout: the same
// gradients as without, a per-step report whose predicted peak matches the
// allocator's, and off again with _disable().
#include <gtest/gtest.h>

#include "engine/allocator.h"
#include "nn/gpt.h"
#include "ops/ops.h"

namespace remat::nn {
namespace {

std::vector<std::vector<float>> step(GPT& model, const Tensor& ids, const Tensor& targets) {
  for (const Tensor& p : model.parameters()) p.set_grad(Tensor());
  model.forward(ids, targets).loss.backward();
  std::vector<std::vector<float>> grads;
  for (const Tensor& p : model.parameters()) grads.push_back(p.grad().to_vector<float>());
  return grads;
}

TEST(GradientCheckpointing, EnabledOnAGptGivesTheSameGradientsAndReportsEachStep) {
  const GPTConfig config{.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.2,
                         .seed = 4};
  Generator g(1);
  CategoryGuard data(MemoryCategory::Data);
  const Tensor ids = randint(11, {3, 8}, g), targets = randint(11, {3, 8}, g);
  CategoryGuard activations(MemoryCategory::Activation);
  // Dropout draws move on with every forward: compare step by step with a
  // twin model that never checkpoints.
  GPT plain(config), checkpointed(config);
  checkpointed.gradient_checkpointing_enable({.policy = "cost", .budget = 1 << 20});
  EXPECT_TRUE(checkpointed.is_gradient_checkpointing());
  EXPECT_FALSE(plain.checkpointing_report().has_value());
  for (int i = 0; i < 3; ++i) {
    // The report before the plain twin's step, which its peak would count.
    const std::vector<std::vector<float>> grads = step(checkpointed, ids, targets);
    const scheduler::StepReport report = *checkpointed.checkpointing_report();
    EXPECT_EQ(grads, step(plain, ids, targets)) << "step " << i;
    EXPECT_EQ(report.step, i + 1);
    EXPECT_EQ(report.profiling, i == 0) << report.str();
    if (i == 0) continue;
    ASSERT_TRUE(report.predicted_peak_bytes.has_value());
    EXPECT_NEAR(static_cast<double>(*report.predicted_peak_bytes), static_cast<double>(report.measured_peak_bytes),
                0.02 * static_cast<double>(report.measured_peak_bytes)) << report.str();
    EXPECT_LE(report.measured_peak_bytes, 1 << 20);
  }
  checkpointed.gradient_checkpointing_disable();
  EXPECT_FALSE(checkpointed.checkpointing_report().has_value());
  EXPECT_EQ(step(checkpointed, ids, targets), step(plain, ids, targets));
}

}  // namespace
}  // namespace remat::nn
