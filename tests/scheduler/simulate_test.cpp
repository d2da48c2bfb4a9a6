// The liveness simulator against the allocator, byte for byte, on a graph
// small enough to follow by hand: constants made between its nodes
// (engine/record.h, Note [Inputs from outside the graph]) under every
// plan that replays one node, none or all of them. Random graphs check the
// same under the planners' plans (random_graph_test.cpp).
#include "scheduler/simulate.h"
#include "scheduler/profiler.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/allocator.h"
#include "ops/ops.h"
#include "scheduler/checkpointer.h"
#include "tests/support/plans.h"

namespace remat::scheduler {
namespace {

// Seven nodes reading three constants made between them: s, read by two
// muls (one through a view) and held by the caller to the end of forward;
// add's 1.0, a temporary; and mean's divisor, saved by its div.
Tensor constants_graph(const Tensor& w) {
  const Tensor h = tanh(w);
  const Tensor s = scalar_tensor(0.5);
  const Tensor a = add(mul(h, s), 1.0);
  const Tensor b = mul(sigmoid(a), reshape(s, {1}));
  return mean(b);
}

struct Measured {
  int64_t after_forward = 0;  // live bytes above the start once forward returned
  int64_t peak = 0;           // over forward and backward
};

// One step of constants_graph with `tags` applied by position.
Measured measure(const Tensor& w, const std::vector<Tag>& tags) {
  w.set_grad(Tensor());
  const int64_t start = cpu_allocator().stats().live_transient;
  TransientPeakWatch watch;
  Tensor loss;
  {
    size_t position = 0;
    RecomputeScope scope([&](const Node&) { return tags.at(position++); });
    loss = constants_graph(w);
  }
  const int64_t after_forward = cpu_allocator().stats().live_transient - start;
  loss.backward();
  return {after_forward, watch.rise()};
}

TEST(Simulate, ConstantsMadeBetweenNodesArePredictedExactly) {
  Profiling profiling;  // measure the graph recorded here
  Generator g(5);
  const Tensor w = normal({8, 16}, 0, 1, DType::Float32, g).requires_grad_();
  GraphProfile profile;
  {
    const Tensor loss = constants_graph(w);
    loss.backward();
    profile = profile_graph(loss);
  }
  ASSERT_EQ(profile.outside_inputs.size(), 3u);
  const size_t n = profile.nodes.size();
  std::vector<std::vector<Tag>> plans{std::vector<Tag>(n, Tag::Keep), std::vector<Tag>(n, Tag::Recompute)};
  for (size_t v = 0; v < n; ++v) {
    plans.emplace_back(n, Tag::Keep);
    plans.back()[v] = Tag::Recompute;
  }
  for (const std::vector<Tag>& tags : plans) {
    SCOPED_TRACE("replayed:" + testing::replayed_positions(tags));
    const Simulation predicted = simulate(profile, tags);
    const Measured measured = measure(w, tags);
    EXPECT_EQ(measured.peak, predicted.peak_bytes);
    EXPECT_EQ(measured.after_forward, predicted.saved_bytes_after_forward);
  }
}

// A constant made inside record() for the graph's first node is the step's
// (engine/record.h, Note [Inputs from outside the graph]): the
// Checkpointer's profile counts it from position 0, under a plan that keeps
// everything and one that replays.
TEST(Simulate, AConstantMadeForTheFirstNodeIsPredicted) {
  Generator g(6);
  const Tensor w = normal({8, 16}, 0, 1, DType::Float32, g).requires_grad_();
  for (const std::string policy : {"none", "blocks"}) {
    SCOPED_TRACE("policy " + policy);
    Checkpointer checkpointer({.policy = policy});
    for (int step = 1; step <= 2; ++step) {
      w.set_grad(Tensor());
      Tensor loss;
      {
        auto recording = checkpointer.record();
        BlockScope block("block");
        loss = mean(sigmoid(tanh(mul(w, scalar_tensor(0.5)))));
      }
      loss.backward();
    }
    ASSERT_NE(checkpointer.plan(), nullptr);
    ASSERT_NE(checkpointer.profile(), nullptr);
    EXPECT_EQ(checkpointer.profile()->outside_inputs.size(), 2u);  // 0.5 and mean's divisor
    const StepReport report = checkpointer.report();
    ASSERT_TRUE(report.predicted_peak_bytes.has_value());
    EXPECT_EQ(report.measured_peak_bytes, *report.predicted_peak_bytes);
  }
}

}  // namespace
}  // namespace remat::scheduler
