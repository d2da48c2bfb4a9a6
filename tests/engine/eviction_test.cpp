// Note [Eviction]: the mechanism alone, under a policy that evicts the first
// candidate it is offered: what is a candidate (never a value a handle still
// holds, never a pinned one), evicted values are rebuilt on demand, again
// after a second eviction, and gradients stay bit-identical to keep-all.
#include <gtest/gtest.h>

#include <vector>

#include "engine/allocator.h"
#include "engine/eviction.h"
#include "ops/ops.h"
#include "tests/support/errors.h"

namespace remat {
namespace {

// Evicts the earliest-recorded candidate, and remembers every offer.
struct EvictFirst final : EvictionPolicy {
  std::vector<std::vector<EvictionCandidate>> offers;
  size_t choose(const std::vector<EvictionCandidate>& candidates, const ResidentPool&) override {
    offers.push_back(candidates);
    return 0;
  }
};

constexpr int64_t kSide = 64;                       // (64, 64) float32 values
constexpr int64_t kValueBytes = kSide * kSide * 4;  // 16 KiB each

bool offered(const EvictFirst& policy, const Node* node) {
  for (const auto& offer : policy.offers) {
    for (const EvictionCandidate& c : offer) {
      for (const Node* n : c.nodes) {
        if (n == node) return true;
      }
    }
  }
  return false;
}

// A (kSide, kSide) parameter drawn from `seed`.
Tensor parameter(uint64_t seed) {
  Generator g(seed);
  Tensor w = normal({kSide, kSide}, 0, 0.1, DType::Float32, g).requires_grad_();
  w.storage()->set_category(MemoryCategory::Parameter);
  return w;
}

// A parameter, and in scope a pool of EvictFirst that fits nothing (a
// 1-byte budget): every allocation of the step looks for a victim.
struct TightPool {
  explicit TightPool(uint64_t seed)
      : w(parameter(seed)),
        policy(std::make_shared<EvictFirst>()),
        pool(std::make_shared<ResidentPool>(policy, 1, Device::cpu())),
        scope(pool) {
    pool->begin_step();
  }
  const Tensor w;
  const std::shared_ptr<EvictFirst> policy;
  const std::shared_ptr<ResidentPool> pool;
  RecomputeScope scope;
};

// A chain exp, tanh, exp, tanh, ... of `length` ops from a leaf, its loss a sum.
struct Chain {
  Tensor w;
  std::vector<float> grad;
};

Chain chain_step(const std::shared_ptr<ResidentPool>& pool, int length) {
  Chain chain{parameter(3), {}};
  Tensor loss;
  {
    RecomputeScope scope(pool);
    if (pool) pool->begin_step();
    Tensor h = chain.w;
    for (int i = 0; i < length; ++i) h = i % 2 == 0 ? exp(h) : tanh(h);
    loss = sum(h);
  }
  loss.backward();
  chain.grad = chain.w.grad().to_vector<float>();
  return chain;
}

TEST(Eviction, AChainUnderATightBudgetIsRebuiltBitIdentically) {
  const Chain kept = chain_step(nullptr, 12);
  const auto policy = std::make_shared<EvictFirst>();
  // Room for about five values of the twelve.
  const auto pool = std::make_shared<ResidentPool>(policy, 5 * kValueBytes + 1024, Device::cpu());
  const int64_t before = cpu_allocator().stats().live_transient;
  ScopedPeak peak;
  const Chain evicted = chain_step(pool, 12);
  EXPECT_EQ(evicted.grad, kept.grad);
  EXPECT_GT(pool->stats().evictions, 0);
  EXPECT_GT(pool->stats().rebuilds, 0);
  EXPECT_EQ(pool->stats().evicted_bytes, pool->stats().evictions * kValueBytes);
  EXPECT_EQ(pool->stats().over_budget_allocations, 0);
  EXPECT_LE(peak.stats().peak_transient - before, pool->budget());
  // The step's graph is gone: so is every resident value, and the pool is idle.
  EXPECT_EQ(pool->resident_values(), 0u);
  EXPECT_EQ(cpu_allocator().stats().live_transient, before);
}

TEST(Eviction, AValueAHandleHoldsIsNeverACandidate) {
  const TightPool t(4);
  const Tensor& w = t.w;
  Tensor a = exp(w);
  const Tensor b = tanh(a);  // a and b held: nothing to evict
  EXPECT_TRUE(t.policy->offers.empty());
  EXPECT_GE(t.pool->stats().over_budget_allocations, 2);
  Node* a_node = a.grad_fn().get();
  a = Tensor();  // now only the graph holds a's bytes
  const Tensor c = exp(b);
  EXPECT_TRUE(a_node->evicted());
  EXPECT_FALSE(b.grad_fn()->evicted());
  EXPECT_FALSE(offered(*t.policy, b.grad_fn().get()));
  // exp's backward reads a (its output): a is rebuilt, and the gradient is
  // keep-all's to the bit.
  const Tensor loss = sum(c);
  loss.backward();
  EXPECT_GE(t.pool->stats().rebuilds, 1);
  const std::vector<float> grad = w.grad().to_vector<float>();
  w.set_grad(Tensor());
  {
    RecomputeScope keep_all;
    sum(exp(tanh(exp(w)))).backward();
  }
  EXPECT_EQ(grad, w.grad().to_vector<float>());
}

TEST(Eviction, APinnedValueIsNeverACandidate) {
  const TightPool t(5);
  const Tensor& w = t.w;
  Tensor a = exp(w);
  Node* a_node = a.grad_fn().get();
  const Tensor reader = tanh(a);  // keeps a's node in the graph
  a_node->pin();
  a = Tensor();
  Tensor b = exp(w);
  EXPECT_FALSE(a_node->evicted());
  EXPECT_FALSE(offered(*t.policy, a_node));
  a_node->unpin();
  const Tensor c = exp(w);
  EXPECT_TRUE(a_node->evicted());
}

TEST(Eviction, AValueIsRebuiltAgainAfterASecondEviction) {
  const TightPool t(6);
  const Tensor& w = t.w;
  Tensor a = exp(w);
  const std::shared_ptr<Node> a_node = a.grad_fn();
  const std::vector<float> expected = a.to_vector<float>();
  const Tensor b = tanh(a);  // b's replay input, and tanh's saved output, are a and b
  a = Tensor();
  const Tensor c = exp(w);  // evicts a
  ASSERT_TRUE(a_node->evicted());
  Tensor again = a_node->rebuild();
  EXPECT_FALSE(a_node->evicted());
  EXPECT_EQ(again.to_vector<float>(), expected);
  again = Tensor();
  const Tensor d = exp(w);  // evicts it again
  EXPECT_TRUE(a_node->evicted());
  EXPECT_EQ(a_node->rebuild().to_vector<float>(), expected);
  EXPECT_EQ(t.pool->stats().rebuilds, 2);
}

}  // namespace
}  // namespace remat
