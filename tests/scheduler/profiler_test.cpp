// The Profiler (scheduler/profiler.h): what it measures of the graphs
// recorded under it, and that nothing else is measured.
#include "scheduler/profiler.h"

#include <gtest/gtest.h>

#include "engine/backward.h"
#include "ops/ops.h"
#include "scheduler/profile.h"
#include "tests/support/errors.h"

namespace remat::scheduler {
namespace {

using testing::contains;
using testing::error_of;

TEST(Profiler, TheRootRecordsItsPassFirstTouchesApart) {
  // mul's backward makes w's 4 MiB gradient. With the allocator's cache
  // empty that is a fresh block whose pages the pass maps; the next pass
  // finds it cached. A planner leaves that time out of a step's.
  Tensor w = uniform({1024, 1024}, -1.0, 1.0).requires_grad_();
  const Tensor x = uniform({1024, 1024}, -1.0, 1.0);
  auto pass = [&] {
    w.set_grad(Tensor());  // its block back to the cache
    Profiling profiling;
    const Tensor loss = sum(mul(w, x));
    loss.backward();
    return profiling.profiler()->measured(loss.grad_fn()->record());
  };
  cpu_allocator().empty_cache();
  const NodeMeasures cold = pass();
  EXPECT_GT(cold.backward_pass_first_touch_ms, 0.0);
  EXPECT_LE(cold.backward_pass_first_touch_ms, cold.backward_pass_ms);
  const NodeMeasures warm = pass();
  EXPECT_EQ(warm.backward_pass_first_touch_ms, 0.0);
  EXPECT_GT(warm.backward_pass_ms, 0.0);
}

TEST(Profiler, AnEarlyReleaseAndTheGradientsBytesAreMeasured) {
  // The second linear lets go of gelu's output once dW is computed; gelu's
  // backward writes its dx over the incoming gradient (no bytes of its own).
  Profiling profiling;
  Tensor x = normal({64, 32}).requires_grad_();
  Tensor w1 = normal({1024, 32}, 0, 0.1).requires_grad_();
  Tensor w2 = normal({32, 1024}, 0, 0.1).requires_grad_();
  Tensor loss = sum(linear(gelu(linear(x, w1)), w2));
  const std::shared_ptr<Node> second_linear = loss.grad_fn()->next_edges()[0].node;
  const std::shared_ptr<Node> gelu_node = second_linear->next_edges()[0].node;
  ASSERT_EQ(gelu_node->name(), "gelu");
  loss.backward();
  const Profiler& profiler = *profiling.profiler();
  const NodeMeasures linear_measured = profiler.measured(second_linear->record());
  EXPECT_EQ(linear_measured.released_early, 0);  // its saved input
  // Before the release: dW (32 x 1024 floats); after it, counted from the
  // same start as if the release had freed nothing: dW and dx (64 x 1024).
  EXPECT_EQ(linear_measured.backward_peak_bytes, 32 * 1024 * 4);
  EXPECT_EQ(linear_measured.backward_late_peak_bytes, 32 * 1024 * 4 + 64 * 1024 * 4);
  EXPECT_EQ(linear_measured.grad_bytes, (std::vector<int64_t>{64 * 1024 * 4, 32 * 1024 * 4}));
  const NodeMeasures gelu_measured = profiler.measured(gelu_node->record());
  EXPECT_EQ(gelu_measured.released_early, -1);
  EXPECT_EQ(gelu_measured.grad_bytes, std::vector<int64_t>{kGradientAliasesOutput});
  EXPECT_TRUE(gelu_measured.backward_ran);
}

TEST(Profiler, OnlyTheFirstBackwardThroughANodeIsMeasured) {
  Profiling profiling;
  const Tensor x = normal({256, 256}).requires_grad_();
  const Tensor loss = sum(relu(x));
  loss.backward(Tensor(), /*retain_graph=*/true);
  const Profiler& profiler = *profiling.profiler();
  const NodeMeasures first = profiler.measured(loss.grad_fn()->record());
  loss.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_EQ(profiler.measured(loss.grad_fn()->record()).backward_ms, first.backward_ms);
  EXPECT_EQ(profiler.measured(loss.grad_fn()->record()).backward_pass_ms, first.backward_pass_ms);
}

TEST(Profiler, AnUnmeasuredGraphIsNotProfiledButRefusedSayingHowToMeasureIt) {
  const auto bystander = std::make_shared<Profiler>();  // made, never listening
  const Tensor loss = sum(relu(normal({4, 4}).requires_grad_()));
  loss.backward();
  EXPECT_FALSE(bystander->measured(loss.grad_fn()->record()).observed);
  EXPECT_EQ(bystander->measured(loss.grad_fn()->record()).backward_ms, 0.0);
  const std::string message = error_of([&] { profile_graph(loss); });
  EXPECT_TRUE(contains(message, "recorded unmeasured")) << message;
  EXPECT_TRUE(contains(message, "scheduler::Profiling")) << message;
}

// The Profiler keeps its measures by sequence_nr; those of records no one
// holds any more go as it measures more, so a long run's Profiler stays small.
TEST(Profiler, MeasuresOfGraphsLetGoAreForgotten) {
  Profiling profiling;
  const Tensor x = normal({4}).requires_grad_();
  std::shared_ptr<const NodeRecord> kept;
  for (int step = 0; step < 3000; ++step) {
    const Tensor loss = sum(relu(x));
    loss.backward();
    if (step == 0) kept = loss.grad_fn()->shared_record();
  }
  EXPECT_LT(profiling.profiler()->nodes_measured(), 3000u);  // 6000 nodes were measured
  EXPECT_TRUE(profiling.profiler()->measured(*kept).backward_ran);  // a record still held keeps its measures
}

TEST(Profiler, EachProfilerCountsTheReplaysOfItsOwnNodes) {
  const Tensor x = normal({32, 32}).requires_grad_();
  const auto mine = std::make_shared<Profiler>(), other = std::make_shared<Profiler>();
  const TagPolicy drop_tanh = [](const Node& node) { return node.name() == "tanh" ? Tag::Recompute : Tag::Keep; };
  Tensor loss;
  {
    GraphObserverScope observing(mine);
    RecomputeScope policy(drop_tanh);
    loss = sum(mul(tanh(x), x));  // mul saves tanh's output: replayed once
  }
  Tensor unrelated;
  {
    GraphObserverScope observing(other);
    unrelated = sum(relu(x));
  }
  loss.backward();
  unrelated.backward();
  EXPECT_EQ(mine->replays().nodes, 1);
  EXPECT_EQ(mine->replays().flops, loss.grad_fn()->next_edges()[0].node->next_edges()[0].node->record().replay_flops);
  EXPECT_GT(mine->replays().ms, 0.0);
  EXPECT_EQ(other->replays().nodes, 0);
}

}  // namespace
}  // namespace remat::scheduler
