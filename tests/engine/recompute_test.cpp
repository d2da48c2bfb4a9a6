// Note [Recompute]: dropped outputs are rebuilt by replay, gradients are
// bit-identical to keeping everything, and dropped bytes are really gone
// between forward and backward.
#include <gtest/gtest.h>

#include "engine/allocator.h"
#include "nn/gpt.h"
#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/replay_counter.h"

namespace remat {
namespace {

struct Step {
  std::vector<std::vector<float>> grads;
  int64_t saved_bytes = 0;  // activation bytes alive after forward
  float loss = 0;
};

// A small MLP step, every op tagged by `policy` (none: keep all).
Step mlp_step(const TagPolicy& policy) {
  Generator g(5);
  std::vector<Tensor> ws;
  for (int i = 0; i < 3; ++i) {
    ws.push_back(normal({64, 64}, 0, 0.2, DType::Float32, g).requires_grad_());
    ws.back().storage()->set_category(MemoryCategory::Parameter);
  }
  const Tensor x = normal({32, 64}, 0, 1, DType::Float32, g);
  const Tensor y = randint(64, {32}, g);
  Step step;
  Tensor loss;
  {
    RecomputeScope scope(policy);
    Tensor h = x;
    for (int i = 0; i < 3; ++i) h = i < 2 ? relu(linear(h, ws[i])) : linear(h, ws[i]);
    loss = cross_entropy(h, y);
  }
  step.saved_bytes = cpu_allocator().stats().live_of(MemoryCategory::Activation);
  loss.backward();
  step.loss = loss.item<float>();
  for (const Tensor& w : ws) step.grads.push_back(w.grad().to_vector<float>());
  return step;
}

TagPolicy recompute_all() {
  return [](const Node&) { return Tag::Recompute; };
}

TEST(Recompute, MlpGradientsAreBitIdenticalAndFewerBytesAreSaved) {
  const int64_t base = cpu_allocator().stats().live_of(MemoryCategory::Activation);
  const Step kept = mlp_step({});
  const auto replays = std::make_shared<ReplayCounter>();
  Step dropped;
  {
    GraphObserverScope observing(replays);
    dropped = mlp_step(recompute_all());
  }
  EXPECT_EQ(dropped.loss, kept.loss);
  EXPECT_EQ(dropped.grads, kept.grads);
  // Kept: the batch, the two relu outputs (which the next linear and the
  // relu backward read), the logits (which cross-entropy's backward reads),
  // its row statistics, labels and loss. Dropped: the relu outputs and the
  // logits are rebuilt (the other linear outputs are never saved either
  // way); the row statistics are a side result of cross-entropy, kept.
  EXPECT_EQ(kept.saved_bytes - dropped.saved_bytes, 3 * 32 * 64 * 4);
  EXPECT_GT(replays->nodes, 0);
  EXPECT_GT(replays->flops, 0);
  EXPECT_EQ(cpu_allocator().stats().live_of(MemoryCategory::Activation), base);
}

TEST(Recompute, OnlyReluDroppedStillMatches) {
  const Step kept = mlp_step({});
  const Step dropped = mlp_step([](const Node& n) { return n.name() == "relu" ? Tag::Recompute : Tag::Keep; });
  EXPECT_EQ(dropped.grads, kept.grads);
}

std::vector<std::vector<float>> gpt_grads(const TagPolicy& policy) {
  nn::GPT model({.vocab_size = 17, .block_size = 12, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.2,
                 .seed = 4});
  Generator g(8);
  const Tensor ids = randint(17, {3, 12}, g), targets = randint(17, {3, 12}, g);
  Tensor loss;
  {
    RecomputeScope scope(policy);
    loss = model.forward(ids, targets).loss;
  }
  loss.backward();
  std::vector<std::vector<float>> grads;
  for (const Tensor& p : model.parameters()) grads.push_back(p.grad().to_vector<float>());
  return grads;
}

TEST(Recompute, GptWithDropoutIsBitIdentical) {
  const auto kept = gpt_grads({});
  EXPECT_EQ(gpt_grads(recompute_all()), kept);
  // Only the blocks' insides (as gradient checkpointing per block does).
  EXPECT_EQ(gpt_grads([](const Node& n) { return n.record().block ? Tag::Recompute : Tag::Keep; }), kept);
}

// An op whose replays fail (its forward runs once, at record time).
class FailingReplayNode final : public Node {
 public:
  std::string_view name() const override { return "failing_replay"; }
  Tensor forward(const Tensors& in) override {
    REMAT_CHECK(calls_++ == 0, "failing_replay: this replay fails on purpose");
    return contiguous_copy(in[0]);
  }
  Tensors backward(const Tensor& dout) override { return {dout}; }

 private:
  int calls_ = 0;
};

// A replay lets go of its inputs before it runs (Note [Replays in place]):
// after one fails, asking again says so, instead of blaming a backward.
TEST(Recompute, AFailedReplayIsNamedWhenAskedAgain) {
  const Tensor x = normal({4, 4}, 0, 1, DType::Float32).requires_grad_();
  Tensor y;
  {
    RecomputeScope scope(recompute_all());
    y = apply_op(std::make_shared<FailingReplayNode>(), {x});
  }
  Node& node = *y.grad_fn();
  ASSERT_EQ(node.tag(), Tag::Recompute);
  EXPECT_TRUE(testing::contains(testing::error_of([&] { node.rebuild(); }), "fails on purpose"));
  const std::string again = testing::error_of([&] { node.rebuild(); });
  EXPECT_TRUE(testing::contains(again, "failing_replay: an earlier replay of it failed")) << again;
}

}  // namespace
}  // namespace remat
