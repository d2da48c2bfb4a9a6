// The Profiler on a GPU (label cuda; skipped, with a message, where no GPU
// is present): node times from CUDA events on the compute stream, a pass's
// replays inside its time, and a checkpointed step's gradients on the GPU
// equal to keep-all's. Without CUDA in the build a GpuSpan times nothing.
#include <gtest/gtest.h>

#include "engine/device_clock.h"
#include "engine/factory.h"
#include "nn/gpt.h"
#include "ops/ops.h"
#include "scheduler/checkpointer.h"
#include "scheduler/profile.h"
#include "scheduler/profiler.h"
#if REMAT_HAVE_CUDA
#include "tests/support/gpu.h"
#endif

namespace remat::scheduler {
namespace {

TEST(GpuSpan, OffAGpuItTimesNothing) {
  GpuSpan span(Device::cpu());
  EXPECT_FALSE(span.timed());
  span.stop();
  EXPECT_THROW(span.ms(), Error);
}

#if REMAT_HAVE_CUDA

nn::GPTConfig small_gpt() {  // the explicit MLP: its gelu nodes are the ones dropped below
  return {.vocab_size = 31, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 32, .dropout = 0.1, .seed = 4,
          .mlp = nn::MlpPath::Explicit};
}

TEST(CudaProfiler, GpuNodesAreTimedByEventsAndTheirPassIncludesItsReplays) {
  REMAT_SKIP_WITHOUT_GPU("GPU node times");
  const Device gpu = Device::cuda(0);
  nn::GPT model(small_gpt());
  model.to(gpu);
  Generator g(5);
  const Tensor ids = to(randint(31, {4, 16}, g), gpu), targets = to(randint(31, {4, 16}, g), gpu);
  const auto profiler = std::make_shared<Profiler>();
  Tensor loss;
  {
    GraphObserverScope profiling(profiler);
    RecomputeScope drop_gelu([](const Node& node) { return node.name() == "gelu" ? Tag::Recompute : Tag::Keep; });
    loss = model.forward(ids, targets).loss;
  }
  loss.backward();
  const GraphProfile graph = profile_graph(loss);  // resolves the events
  double forward = 0, backward = 0, replays = 0;
  for (const NodeProfile& node : graph.nodes) {
    EXPECT_GE(node.forward_ms, 0.0) << node.op;
    forward += node.forward_ms;
    backward += node.backward_ms;
    replays += node.replay_ms + node.replay_in_place_ms;
  }
  EXPECT_GT(forward, 0.0);
  EXPECT_GT(backward, 0.0);
  EXPECT_GT(replays, 0.0);  // the two gelus
  const NodeMeasures pass = profiler->measured(loss.grad_fn()->record());
  EXPECT_GE(pass.backward_pass_ms, pass.backward_pass_replay_ms);
  EXPECT_NEAR(pass.backward_pass_replay_ms, replays, 1e-9 + 1e-6 * replays);
  EXPECT_EQ(pass.backward_pass_first_touch_ms, 0.0);
  EXPECT_EQ(profiler->replays().nodes, 2);
}

TEST(CudaProfiler, EveryPolicysGradientsOnTheGpuAreKeepAllsBitForBit) {
  REMAT_SKIP_WITHOUT_GPU("checkpointing on the GPU");
  const Device gpu = Device::cuda(0);
  Generator g(5);
  const Tensor ids = to(randint(31, {4, 16}, g), gpu), targets = to(randint(31, {4, 16}, g), gpu);
  const auto grads_under = [&](const std::string& policy) {
    nn::GPT model(small_gpt());
    model.to(gpu);
    Checkpointer checkpointer({.policy = policy}, gpu);
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
  for (const char* policy : {"blocks", "sqrt", "cost", "auto"}) {
    EXPECT_EQ(grads_under(policy), keep_all) << policy;
  }
}

#endif

}  // namespace
}  // namespace remat::scheduler
