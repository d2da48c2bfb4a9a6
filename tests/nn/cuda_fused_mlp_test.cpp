// GPT's MLP with fused epilogues (nn/gpt.cpp, affine_gelu; Note [Fused
// epilogues] in kernels/cuda/gemm.h), label cuda: on the GPU with the flag
// on, c_fc and GELU are one node (on the explicit MLP path: the default
// fused path, nn::MlpPath, keeps c_fc an affine and makes GELU part of
// c_proj's node instead), the loss and every gradient equal the flag-off
// ones within float rounding, and every checkpointing policy
// (which rehearses the step on the meta device, then may drop and replay
// the fused node) gives keep-all's gradients bit for bit; on the CPU the
// flag leaves the graph as it was.
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/factory.h"
#include "kernels/cuda/gemm.h"
#include "nn/gpt.h"
#include "ops/ops.h"
#include "scheduler/checkpointer.h"
#include "tests/support/gpu.h"

namespace remat {
namespace {

using test::FusedEpilogues;
using test::kGpu;
using test::relative_gap;

nn::GPTConfig small_gpt() {  // 4C = 128: the aux matrix's ld is a multiple of 8, the fused path
  return {.vocab_size = 31, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 32, .dropout = 0.1, .seed = 4,
          .mlp = nn::MlpPath::Explicit};
}

// How many nodes of each op the graph behind `loss` has.
std::map<std::string, int> op_counts(const Tensor& loss) {
  std::map<std::string, int> counts;
  std::set<const Node*> seen;
  std::vector<const Node*> todo{loss.grad_fn().get()};
  while (!todo.empty()) {
    const Node* node = todo.back();
    todo.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    ++counts[std::string(node->name())];
    for (const Edge& e : node->next_edges()) todo.push_back(e.node.get());
  }
  return counts;
}

struct DeviceStep {
  double loss;
  std::vector<std::vector<double>> grads;
  std::map<std::string, int> ops;
};

DeviceStep step_on(Device device) {
  nn::GPT model(small_gpt());
  model.to(device);
  Generator g(5);
  const Tensor ids = to(randint(31, {4, 16}, g), device), targets = to(randint(31, {4, 16}, g), device);
  const Tensor loss = model.forward(ids, targets).loss;
  DeviceStep s{loss.item<double>(), {}, op_counts(loss)};
  loss.backward();
  for (const Tensor& p : model.parameters()) s.grads.push_back(p.grad().to_vector<double>());
  return s;
}

TEST(CudaFusedMlp, OnTheGpuCfcAndGeluAreOneNodeWithTheUnfusedLossAndGradients) {
  REMAT_SKIP_WITHOUT_GPU("the fused MLP");
  const DeviceStep off = step_on(kGpu);
  DeviceStep on;
  {
    FusedEpilogues fused(true);
    on = step_on(kGpu);
  }
  EXPECT_EQ(off.ops.count("affine_gelu"), 0u);
  EXPECT_EQ(off.ops.at("gelu"), 2);
  EXPECT_EQ(on.ops.at("affine_gelu"), 2);
  EXPECT_EQ(on.ops.count("gelu"), 0u);
  EXPECT_EQ(on.ops.at("affine"), off.ops.at("affine") - 2);  // c_attn, attention's c_proj and the MLP's c_proj
  EXPECT_NEAR(on.loss, off.loss, 1e-5 * std::abs(off.loss));
  ASSERT_EQ(on.grads.size(), off.grads.size());
  for (size_t i = 0; i < off.grads.size(); ++i) EXPECT_LT(relative_gap(on.grads[i], off.grads[i]), 1e-4) << i;
}

TEST(CudaFusedMlp, OnTheCpuTheFlagLeavesTheGraphAndEveryBit) {
  const DeviceStep off = step_on(Device::cpu());
  FusedEpilogues fused(true);
  const DeviceStep on = step_on(Device::cpu());
  EXPECT_EQ(on.ops, off.ops);
  EXPECT_EQ(on.loss, off.loss);
  EXPECT_EQ(on.grads, off.grads);
}

TEST(CudaFusedMlp, EveryPolicysGradientsWithTheFusedMlpAreKeepAllsBitForBit) {
  REMAT_SKIP_WITHOUT_GPU("the fused MLP under checkpointing");
  FusedEpilogues fused(true);
  Generator g(5);
  const Tensor ids = to(randint(31, {4, 16}, g), kGpu), targets = to(randint(31, {4, 16}, g), kGpu);
  const auto grads_under = [&](const std::string& policy) {
    nn::GPT model(small_gpt());
    model.to(kGpu);
    scheduler::Checkpointer checkpointer({.policy = policy}, kGpu);
    std::vector<std::vector<float>> grads;
    for (int step = 0; step < 3; ++step) {  // profiling, then planned steps
      for (const Tensor& p : model.parameters()) p.set_grad(Tensor());
      Tensor loss;
      {
        const auto recording = checkpointer.record();
        loss = model.forward(ids, targets).loss;
      }
      loss.backward();
    }
    for (const Tensor& p : model.parameters()) grads.push_back(p.grad().to_vector<float>());
    return grads;
  };
  const auto keep_all = grads_under("none");
  for (const char* policy : {"blocks", "sqrt", "cost", "auto"}) EXPECT_EQ(grads_under(policy), keep_all) << policy;
  // The fused node dropped and replayed (its GEMM and epilogue run again),
  // against one step that keeps it.
  const auto one_step = [&](bool drop_fused) {
    nn::GPT model(small_gpt());
    model.to(kGpu);
    Tensor loss;
    {
      RecomputeScope drop([drop_fused](const Node& node) {
        return drop_fused && node.name() == "affine_gelu" ? Tag::Recompute : Tag::Keep;
      });
      loss = model.forward(ids, targets).loss;
    }
    loss.backward();
    std::vector<std::vector<float>> grads;
    for (const Tensor& p : model.parameters()) grads.push_back(p.grad().to_vector<float>());
    return grads;
  };
  EXPECT_EQ(one_step(true), one_step(false));
}

}  // namespace
}  // namespace remat

#else

TEST(CudaFusedMlp, NeedACudaBuild) { GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): the fused MLP not built"; }

#endif
