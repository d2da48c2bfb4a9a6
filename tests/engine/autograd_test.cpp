// The backward executor: accumulation, retain_graph, no-grad, detach, saved
// values freed as backward goes, and the errors a user can hit.
#include "engine/backward.h"

#include <gtest/gtest.h>

#include "ops/ops.h"

namespace remat {
namespace {

std::vector<double> grad_of(const Tensor& t) { return t.grad().to_vector<double>(); }

TEST(Autograd, ChainRuleAndAccumulationIntoLeaves) {
  Tensor x = from_vector(std::vector<double>{1, 2, 3}, {3}).requires_grad_();
  // y = sum(x * x + x) -> dy/dx = 2x + 1
  sum(mul(x, x) + x).backward();
  EXPECT_EQ(grad_of(x), (std::vector<double>{3, 5, 7}));
  // A second graph adds into the same .grad.
  sum(mul(x, 2.0)).backward();
  EXPECT_EQ(grad_of(x), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(x.grad().storage()->category(), MemoryCategory::Gradient);
}

TEST(Autograd, SharedInputsGetTheSumOfTheirPaths) {
  Tensor x = from_vector(std::vector<double>{2}, {1}).requires_grad_();
  Tensor a = mul(x, 3.0);
  Tensor b = mul(a, a);   // 9 x^2
  Tensor c = add(b, a);   // 9 x^2 + 3 x -> 18 x + 3 = 39
  sum(c).backward();
  EXPECT_DOUBLE_EQ(x.grad().item<double>(), 39.0);
}

TEST(Autograd, SameTensorTwiceInOneOp) {
  Tensor x = from_vector(std::vector<double>{1, -2}, {2}).requires_grad_();
  Tensor y = from_vector(std::vector<double>{3, 4}, {2}).requires_grad_();
  sum(add(x, x) + y).backward();
  EXPECT_EQ(grad_of(x), (std::vector<double>{2, 2}));
  EXPECT_EQ(grad_of(y), (std::vector<double>{1, 1}));
  // The two leaves' gradients are separate buffers.
  EXPECT_NE(x.grad().storage(), y.grad().storage());
}

TEST(Autograd, NonScalarNeedsAGradient) {
  Tensor x = ones({2, 3}).requires_grad_();
  Tensor y = mul(x, 2.0);
  try {
    y.backward();
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("backward"), std::string::npos) << message;
    EXPECT_NE(message.find("(2, 3)"), std::string::npos) << message;
  }
  y.backward(ones({2, 3}));
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(6, 2.0f));
}

TEST(Autograd, BackwardWithoutRequiresGradIsAnError) {
  Tensor x = ones({2});
  EXPECT_THROW(sum(x).backward(), Error);
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Tensor x = from_vector(std::vector<double>{1, 2}, {2}).requires_grad_();
  Tensor loss = sum(mul(x, x));
  loss.backward({}, /*retain_graph=*/true);
  loss.backward();
  EXPECT_EQ(grad_of(x), (std::vector<double>{4, 8}));
  try {
    loss.backward();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retain_graph"), std::string::npos) << e.what();
  }
}

TEST(Autograd, RetainGraphKeepsWhatALinearLayerWouldFreeEarly) {
  Tensor x = normal({8, 4}).requires_grad_();
  Tensor w = normal({6, 4}).requires_grad_();
  Tensor loss = sum(linear(gelu(linear(x, w)), ones({3, 6})));
  loss.backward({}, /*retain_graph=*/true);
  const std::vector<double> once = grad_of(w);
  loss.backward();  // reads every saved value again, the second linear's input included
  const std::vector<double> twice = grad_of(w);
  ASSERT_EQ(twice.size(), once.size());
  for (size_t i = 0; i < once.size(); ++i) EXPECT_DOUBLE_EQ(twice[i], 2 * once[i]);
}

TEST(Autograd, SoftmaxAndMaskedFillNeverOverwriteAGradientTwoBranchesShare) {
  // add's backward hands the same gradient to both branches: neither may
  // write over it. Reference: the same sums with the branches made apart.
  Tensor x = normal({4, 5}).requires_grad_();
  const Tensor mask = causal_mask(5).alias({4, 5}, {5, 1}, 0);
  const Tensor w = normal({4, 5});
  sum(mul(add(softmax(x, -1), masked_fill(x, mask, 0.0)), w)).backward();
  const std::vector<double> shared = grad_of(x);
  Tensor y = from_vector(x.to_vector<float>(), {4, 5}).requires_grad_();
  sum(mul(softmax(y, -1), w)).backward();
  sum(mul(masked_fill(y, mask, 0.0), w)).backward();
  const std::vector<double> apart = grad_of(y);
  ASSERT_EQ(shared.size(), apart.size());
  for (size_t i = 0; i < shared.size(); ++i) EXPECT_NEAR(shared[i], apart[i], 1e-6);
}

TEST(Autograd, NoGradRecordsNothing) {
  Tensor x = ones({3}).requires_grad_();
  Tensor y;
  {
    NoGradGuard guard;
    y = mul(x, 2.0);
  }
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.grad_fn(), nullptr);
  EXPECT_TRUE(grad_enabled());
}

TEST(Autograd, DetachCutsTheGraph) {
  Tensor x = from_vector(std::vector<double>{3}, {1}).requires_grad_();
  Tensor a = mul(x, x);
  Tensor y = add(mul(a.detach(), x), a);  // d/dx = a + 2x = 9 + 6
  sum(y).backward();
  EXPECT_DOUBLE_EQ(x.grad().item<double>(), 15.0);
  EXPECT_EQ(a.detach().storage(), a.storage());
}

TEST(Autograd, RequiresGradOnANonLeafIsAnError) {
  Tensor x = ones({2}).requires_grad_();
  Tensor y = mul(x, 2.0);
  EXPECT_THROW(y.requires_grad_(), Error);
}

TEST(Autograd, GradientsOnlyWhereNeeded) {
  Tensor w = ones({4, 3}).requires_grad_();
  Tensor x = ones({2, 3});
  sum(linear(x, w)).backward();
  EXPECT_TRUE(w.grad().defined());
  EXPECT_FALSE(x.grad().defined());
}

// Note [Saved value lifetime]: activation bytes fall as backward runs, and
// nothing is left once the graph is released.
TEST(Autograd, ActivationBytesReturnToZeroAfterAStep) {
  Tensor w1 = normal({64, 32}, 0, 0.1).requires_grad_();
  Tensor w2 = normal({10, 64}, 0, 0.1).requires_grad_();
  w1.storage()->set_category(MemoryCategory::Parameter);
  w2.storage()->set_category(MemoryCategory::Parameter);
  Tensor x = normal({16, 32});
  Tensor y = from_vector(std::vector<int64_t>(16, 3), {16});
  const int64_t base = cpu_allocator().stats().live_transient;
  {
    Tensor loss = cross_entropy(linear(relu(linear(x, w1)), w2), y);
    EXPECT_GT(cpu_allocator().stats().live_transient, base);
    loss.backward();
  }
  EXPECT_EQ(cpu_allocator().stats().live_transient, base);
  EXPECT_EQ(cpu_allocator().stats().live_of(MemoryCategory::Temporary), 0);
}

TEST(Autograd, SavedActivationsAreFreedDuringBackward) {
  // A chain of 8 relus on (256, 256) float32 (256 KiB each). Each node saves
  // its output; backward frees them one by one, so the peak during backward
  // stays near the forward's end level instead of adding gradients on top.
  Tensor x = normal({256, 256}).requires_grad_();
  const int64_t base = cpu_allocator().stats().live_transient;
  const int64_t block = 256 * 256 * 4;
  Tensor h = x;
  for (int i = 0; i < 8; ++i) h = relu(h);
  Tensor loss = sum(h);
  h = Tensor();
  const int64_t after_forward = cpu_allocator().stats().live_transient - base;
  EXPECT_EQ(after_forward, 8 * block + 4);  // 8 relu outputs + the scalar
  ScopedPeak scope;
  loss.backward();
  loss = Tensor();
  EXPECT_LE(scope.stats().peak_transient - base, after_forward + 2 * block + 8);
  EXPECT_EQ(cpu_allocator().stats().live_transient, base);
}

TEST(Autograd, GradientBufferOfALeafIsAdoptedWithoutCopy) {
  Tensor w = ones({128, 64}).requires_grad_();
  Tensor x = ones({8, 64});
  const int64_t gradient_bytes = cpu_allocator().stats().live_of(MemoryCategory::Gradient);
  const int64_t allocations_before = cpu_allocator().stats().allocations;
  sum(linear(x, w)).backward();
  // linear output, sum output, root grad, sum's gradient, dW: no copy for .grad
  EXPECT_EQ(cpu_allocator().stats().allocations - allocations_before, 5);
  EXPECT_EQ(cpu_allocator().stats().live_of(MemoryCategory::Gradient) - gradient_bytes, 128 * 64 * 4);
  EXPECT_EQ(w.grad().storage()->category(), MemoryCategory::Gradient);
  EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(128 * 64, 8.0f));  // dW = dy^T x: 8 rows of ones
}

TEST(Autograd, ALinearLayerLetsGoOfItsInputBeforeAllocatingItsInputGradient) {
  // x (64, 32) -> linear to 1024 -> gelu -> linear to 32 -> sum. The second
  // linear alone reads gelu's (64, 1024) output: its backward computes dW,
  // frees that input, then allocates dx of the same size; gelu's backward
  // then writes its dx over the incoming gradient, which nothing else holds.
  // So backward never rises above forward's end level by more than the
  // sum's gradient and one dW, where it used to add two (64, 1024) buffers.
  Tensor x = normal({64, 32}).requires_grad_();
  Tensor w1 = normal({1024, 32}, 0, 0.1).requires_grad_();
  Tensor w2 = normal({32, 1024}, 0, 0.1).requires_grad_();
  Tensor loss = sum(linear(gelu(linear(x, w1)), w2));
  const std::shared_ptr<Node> second_linear = loss.grad_fn()->next_edges()[0].node;
  const std::shared_ptr<Node> gelu_node = second_linear->next_edges()[0].node;
  ASSERT_EQ(second_linear->name(), "linear");
  ASSERT_EQ(gelu_node->name(), "gelu");
  const int64_t after_forward = cpu_allocator().stats().live_transient;
  ScopedPeak scope;
  loss.backward();
  const int64_t dy = 64 * 32 * 4, dw = 32 * 1024 * 4, hidden = 64 * 1024 * 4;
  EXPECT_LE(scope.stats().peak_transient - after_forward, 4 + dy + dw);
  EXPECT_LT(scope.stats().peak_transient - after_forward, hidden);
}

TEST(Autograd, AGradientTheCallerHoldsIsNeverOverwritten) {
  Tensor x = from_vector(std::vector<double>{-1.0, 0.0, 2.0}, {3}).requires_grad_();
  const Tensor g = from_vector(std::vector<double>{1.0, 2.0, 3.0}, {3});
  gelu(x).backward(g);
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{1.0, 2.0, 3.0}));
  Tensor x2 = from_vector(std::vector<double>{-1.0, 0.0, 2.0}, {3}).requires_grad_();
  sum(mul(gelu(x2), g)).backward();
  EXPECT_EQ(grad_of(x), grad_of(x2));
}

TEST(Autograd, InPlaceChangeOfASavedValueIsAnError) {
  Tensor w = from_vector(std::vector<double>{1, 2}, {2}).requires_grad_();
  Tensor x = from_vector(std::vector<double>{3, 4}, {2}).requires_grad_();
  Tensor loss = sum(mul(w, x));  // saves w and x
  w.data<double>()[0] = 5;       // an optimizer would do this...
  w.storage()->bump_version();   // ...and say so
  try {
    loss.backward();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("modified in place"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace remat
