// The profile of a recorded graph: order, bytes, FLOPs, block marks and
// signatures, on graphs small enough to count by hand.
#include "scheduler/profile.h"
#include "scheduler/profiler.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "ops/ops.h"
#include "scheduler/plan.h"

namespace remat::scheduler {
namespace {

// x (8, 4) -> linear(4 -> 3) -> relu -> transpose view -> sum
Tensor small_graph(int64_t rows) {
  Profiling profiling;  // measure the graph recorded here
  Tensor w = ones({3, 4}).requires_grad_();
  Tensor x = ones({rows, 4});
  Tensor h;
  {
    BlockScope block("body");
    h = relu(linear(x, w));
  }
  return sum(transpose(h, 0, 1));
}

TEST(Profile, RowsInRecordingOrderWithBytesAndFlops) {
  const GraphProfile p = profile_graph(small_graph(8));
  ASSERT_EQ(p.nodes.size(), 4u);
  EXPECT_EQ(p.nodes[0].op, "linear");
  EXPECT_EQ(p.nodes[1].op, "relu");
  EXPECT_EQ(p.nodes[2].op, "permute");
  EXPECT_EQ(p.nodes[3].op, "sum");
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(p.nodes[i].position, static_cast<int64_t>(i));
  EXPECT_EQ(p.nodes[0].output_shape, (Shape{8, 3}));
  EXPECT_EQ(p.nodes[0].output_bytes, 8 * 3 * 4);
  EXPECT_EQ(p.nodes[0].flops, 2 * 8 * 4 * 3);
  EXPECT_EQ(p.nodes[2].output_bytes, 0);  // a view
  EXPECT_TRUE(std::isinf(p.nodes[2].ms_per_mib()));
  EXPECT_EQ(p.nodes[3].output_bytes, 4);
  EXPECT_EQ(p.nodes[0].block, "body");
  EXPECT_EQ(p.nodes[1].block, "body");
  EXPECT_EQ(p.nodes[2].block, "");
  EXPECT_EQ(p.total_output_bytes(), 8 * 3 * 4 * 2 + 4);
  for (const NodeProfile& n : p.nodes) EXPECT_GE(n.forward_ms, 0.0);
}

TEST(Profile, SignatureFollowsOpsAndShapes) {
  EXPECT_EQ(profile_graph(small_graph(8)).signature, profile_graph(small_graph(8)).signature);
  EXPECT_NE(profile_graph(small_graph(8)).signature, profile_graph(small_graph(9)).signature);
}

TEST(Profile, TheTrainingStepIsTheTimedStepWithinBounds) {
  GraphProfile p = profile_graph(small_graph(8));
  p.nodes[0].forward_ms = 3.0;
  p.nodes[0].backward_ms = 5.0;
  for (size_t i = 1; i < p.nodes.size(); ++i) p.nodes[i].forward_ms = p.nodes[i].backward_ms = 0.5;
  const double graph_ms = p.total_forward_ms() + p.total_backward_ms();
  EXPECT_DOUBLE_EQ(graph_ms, 8.0 + 3.0);
  EXPECT_DOUBLE_EQ(p.training_step_ms(), graph_ms);  // not timed: the nodes' own
  p.step_ms = 13.0;
  EXPECT_DOUBLE_EQ(p.training_step_ms(), 13.0);  // the engine's work between nodes counts too
  p.step_ms = 100.0;
  EXPECT_DOUBLE_EQ(p.training_step_ms(), 1.5 * graph_ms);  // up to half the graph's own time
  p.step_ms = 5.0;
  EXPECT_DOUBLE_EQ(p.training_step_ms(), graph_ms);
}

TEST(Profile, AReplayIsPricedAtItsTimedReplayElseAtItsForward) {
  GraphProfile p = profile_graph(small_graph(8));
  NodeProfile& relu = p.nodes[1];
  relu.output_bytes = 2 << 20;  // 2 MiB
  relu.forward_ms = 3.0;
  EXPECT_DOUBLE_EQ(relu.replay_cost_ms(false), 3.0);
  EXPECT_DOUBLE_EQ(relu.replay_cost_ms(true), 3.0);
  EXPECT_DOUBLE_EQ(relu.ms_per_mib(), 1.5);
  relu.replay_ms = 4.0;  // into a new output, slower than forward
  EXPECT_DOUBLE_EQ(relu.replay_cost_ms(false), 4.0);
  EXPECT_DOUBLE_EQ(relu.replay_cost_ms(true), 4.0);
  EXPECT_DOUBLE_EQ(relu.ms_per_mib(), 2.0);
  relu.replay_in_place_ms = 1.0;
  EXPECT_DOUBLE_EQ(relu.replay_cost_ms(false), 4.0);
  EXPECT_DOUBLE_EQ(relu.replay_cost_ms(true), 1.0);
  EXPECT_DOUBLE_EQ(relu.ms_per_mib(), 0.5);
  relu.replay_ms = 0;  // timed in place only: a new output costs a forward
  EXPECT_DOUBLE_EQ(relu.replay_cost_ms(false), 3.0);
}

// 15 draws: ranks 4 and 12, which miss the median with probability
// 2 (1 + 15 + 105 + 455) / 2^15 (ranks 5 and 11 would cover it only 88%).
TEST(Profile, TheMediansIntervalIsTheBinomialOrderStatistics) {
  std::vector<double> values;
  for (int i = 15; i >= 1; --i) values.push_back(i);  // unsorted on purpose
  const MedianInterval fifteen = median_interval(values);
  EXPECT_EQ(fifteen.low, 4);
  EXPECT_EQ(fifteen.high, 12);
  EXPECT_NEAR(fifteen.coverage, 1 - 2 * 576.0 / 32768, 1e-12);
  // Five draws reach only 1 - 2/32 even over their whole range.
  const MedianInterval five = median_interval({3, 1, 2, 5, 4});
  EXPECT_EQ(five.low, 1);
  EXPECT_EQ(five.high, 5);
  EXPECT_NEAR(five.coverage, 0.9375, 1e-12);
  // 2000 draws: about the median's 1.96 standard errors, sqrt(2000) / 2 ranks each side.
  std::vector<double> many(2000);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<double>(i + 1);
  const MedianInterval wide = median_interval(many);
  EXPECT_NEAR(wide.low, 1000 - 1.96 * std::sqrt(2000.0) / 2, 2);
  EXPECT_NEAR(wide.high, 1001 + 1.96 * std::sqrt(2000.0) / 2, 2);
  EXPECT_GE(wide.coverage, 0.95);
  EXPECT_THROW(median_interval({}), Error);
  EXPECT_THROW(median_interval({1, 2, 3}, 1.0), Error);
}

// Constants made between nodes are inputs from outside the graph with rows
// of their own (engine/record.h, Note [Inputs from outside the graph]):
// one per storage, placed by when they were made and when the caller let
// go; the leaf, made before the graph's first node, has none.
TEST(Profile, ConstantsMadeBetweenNodesAreOutsideInputs) {
  Profiling profiling;  // measure the graph recorded here
  Generator g(5);
  const Tensor w = normal({8, 16}, 0, 1, DType::Float32, g).requires_grad_();
  Tensor loss;
  {
    const Tensor h = tanh(w);                           // 0
    const Tensor s = scalar_tensor(0.5);                // held until the block ends
    const Tensor a = add(mul(h, s), 1.0);               // 1, 2: 1.0 goes after node 2
    const Tensor b = mul(sigmoid(a), reshape(s, {1}));  // 3, 4: a view of s is s
    loss = mean(b);                                     // 5, 6: sum, then div by 128 (made before 6)
  }
  const GraphProfile p = profile_graph(loss);
  ASSERT_EQ(p.nodes.size(), 7u);
  ASSERT_EQ(p.outside_inputs.size(), 3u);
  const auto row = [&](size_t e) {
    const OutsideInputProfile& o = p.outside_inputs[e];
    return std::array<int64_t, 3>{o.bytes, o.made_at, o.released_at};
  };
  EXPECT_EQ(row(0), (std::array<int64_t, 3>{4, 1, 7}));  // s: held until forward returned
  EXPECT_EQ(row(1), (std::array<int64_t, 3>{4, 2, 3}));  // 1.0
  EXPECT_EQ(row(2), (std::array<int64_t, 3>{4, 6, 7}));  // 128
  EXPECT_EQ(p.nodes[0].outside, (std::vector<int64_t>{-1}));
  EXPECT_EQ(p.nodes[1].outside, (std::vector<int64_t>{-1, 0}));
  EXPECT_EQ(p.nodes[2].outside, (std::vector<int64_t>{-1, 1}));
  EXPECT_EQ(p.nodes[4].outside, (std::vector<int64_t>{-1, 0}));
  EXPECT_EQ(p.nodes[6].outside, (std::vector<int64_t>{-1, 2}));
}

// out = 2x, an op the planners have never heard of that declares itself
// compute-bound, as a convolution would.
class ConvLike final : public Node {
 public:
  std::string_view name() const override { return "conv_like"; }
  Tensor forward(const Tensors& in) override {
    NoGradGuard no_grad;
    return mul(in[0], 2.0);
  }
  void save(const Tensors& in, const Tensor&) override { save_value(in[0]); }  // as a convolution's backward reads x
  Tensors backward(const Tensor& dout) override { return {mul(dout, 2.0)}; }    // d(2x)/dx = 2
  OpTraits traits() const override { return {.compute_bound = true, .flops = numel(record().output_shape)}; }
};

// Whether an op is compute-bound is what the op declares (OpTraits), not a
// list of op names in the planner: before, any op but matmul, linear and
// affine counted as memory-bound, and `cost` would have replayed it.
TEST(Profile, AnOpDeclaresWhetherItIsComputeBound) {
  Profiling profiling;  // measure the graph recorded here
  Tensor x = ones({16, 8}).requires_grad_();
  const Tensor loss = sum(gelu(apply_op(std::make_shared<ConvLike>(), {gelu(linear(x, ones({8, 8})))})));
  const GraphProfile p = profile_graph(loss);
  ASSERT_EQ(p.nodes.size(), 5u);
  EXPECT_EQ(p.nodes[2].op, "conv_like");
  EXPECT_TRUE(p.nodes[0].compute_bound);   // linear
  EXPECT_FALSE(p.nodes[1].compute_bound);  // gelu
  EXPECT_TRUE(p.nodes[2].compute_bound);
  EXPECT_EQ(p.nodes[2].flops, 16 * 8);
  const Plan plan = make_plan(p, {.policy = "cost"});
  EXPECT_NE(plan.reasons[2].find("compute-bound"), std::string::npos) << plan.reasons[2];
  EXPECT_NE(plan.reasons[1].find("memory-bound"), std::string::npos) << plan.reasons[1];
}

TEST(Profile, AGraphlessTensorIsAnError) { EXPECT_THROW(profile_graph(ones({2})), Error); }

}  // namespace
}  // namespace remat::scheduler
