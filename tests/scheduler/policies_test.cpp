// Recompute policies on a GPT with dropout: gradients bit-identical to
// keeping everything, and the bytes they promise to drop really dropped.
#include "scheduler/policies.h"

#include <gtest/gtest.h>

#include "engine/allocator.h"
#include "nn/gpt.h"
#include "ops/ops.h"

namespace remat::scheduler {
namespace {

struct StepResult {
  std::vector<std::vector<float>> grads;
  int64_t saved_bytes = 0;
  int64_t replays = 0;
};

StepResult gpt_step(const RecomputePolicy& policy) {
  nn::GPT model({.vocab_size = 17, .block_size = 16, .n_layer = 3, .n_head = 2, .n_embd = 32, .dropout = 0.1,
                 .seed = 6});
  Generator g(2);
  const Tensor ids = randint(17, {4, 16}, g), targets = randint(17, {4, 16}, g);
  const int64_t before = cpu_allocator().stats().live_of(MemoryCategory::Activation);
  StepResult run;
  Tensor loss;
  {
    RecomputeScope scope(policy);
    loss = model.forward(ids, targets).loss;
  }
  run.saved_bytes = cpu_allocator().stats().live_of(MemoryCategory::Activation) - before;
  reset_recompute_stats();
  loss.backward();
  run.replays = recompute_stats().nodes;
  for (const Tensor& p : model.parameters()) run.grads.push_back(p.grad().to_vector<float>());
  return run;
}

TEST(Policies, PerBlockIsBitIdenticalAndKeepsOnlyBlockOutputs) {
  const StepResult kept = gpt_step(keep_all());
  const StepResult blocks = gpt_step(per_block());
  EXPECT_EQ(blocks.grads, kept.grads);
  EXPECT_EQ(kept.replays, 0);
  EXPECT_GT(blocks.replays, 3 * 20);  // every block's insides, replayed once
  // Kept under per-block: the embeddings' sum (input of block 0), the three
  // block outputs, ln_f's input and output sides, the head's log-probs...;
  // in all far less than a third of keeping everything.
  EXPECT_LT(blocks.saved_bytes * 3, kept.saved_bytes);
}

TEST(Policies, CostKeepsGemmsReplaysTheRestBitIdentically) {
  const StepResult kept = gpt_step(keep_all());
  const StepResult cost = gpt_step(compute_bound_kept());
  EXPECT_EQ(cost.grads, kept.grads);
  EXPECT_GT(cost.replays, 0);
  EXPECT_LT(cost.saved_bytes, kept.saved_bytes);
  Tensor a = ones({2, 2}).requires_grad_();
  EXPECT_EQ(compute_bound_kept().tag(*matmul(a, a).grad_fn()), Tag::Keep);
  EXPECT_EQ(compute_bound_kept().tag(*relu(a).grad_fn()), Tag::Recompute);
}

TEST(Policies, ABlockOutputIsKeptAndItsInsidesAreNot) {
  nn::GPT model({.vocab_size = 5, .block_size = 4, .n_layer = 2, .n_head = 1, .n_embd = 4, .seed = 1});
  Tensor loss;
  {
    RecomputeScope scope(per_block());
    loss = model.forward(zeros({1, 4}, DType::Int64), zeros({1, 4}, DType::Int64)).loss;
  }
  // Walk back from the loss to block 1's last node: the residual add.
  const Node* node = loss.grad_fn().get();
  while (node && !(node->record().block && *node->record().block == "transformer.h.1")) {
    node = node->next_edges()[0].node.get();
  }
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->name(), "add");
  EXPECT_EQ(node->tag(), Tag::Keep);
  EXPECT_EQ(node->next_edges()[1].node->tag(), Tag::Recompute);  // the MLP branch inside the block
}

TEST(Policies, UnknownNameListsTheKnownOnes) {
  try {
    policy_by_name("sqrtt");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none, blocks"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace remat::scheduler
