// The meta device and MetaScope: tensors with shapes and counted bytes and
// no data; ops on them record and account and compute nothing; a rehearsal
// inside a MetaScope reads real tensors, makes meta ones, and changes no
// real tensor, gradient or random generator.
#include "engine/meta.h"

#include <gtest/gtest.h>

#include "engine/allocator.h"
#include "ops/ops.h"
#include "tests/support/errors.h"

namespace remat {
namespace {

int64_t live_transient(Device device) { return allocator_for(device).stats().live_transient; }

TEST(Meta, ATensorIsCountedByTheMetaAllocatorAndHoldsNoValues) {
  const int64_t cpu_before = live_transient(Device::cpu()), meta_before = live_transient(Device::meta());
  {
    const Tensor t({256, 3}, DType::Float32, Device::meta());
    EXPECT_EQ(t.device(), Device::meta());
    EXPECT_EQ(live_transient(Device::meta()) - meta_before, 256 * 3 * 4);
    EXPECT_EQ(live_transient(Device::cpu()), cpu_before);
    EXPECT_TRUE(testing::contains(t.str(), "meta")) << t.str();
    const std::string message = testing::error_of([&] { (void)t.data<float>(); });
    EXPECT_TRUE(testing::contains(message, "float32 (256, 3) meta")) << message;
    EXPECT_TRUE(testing::contains(testing::error_of([&] { (void)sum(t).item<float>(); }), "meta device"));
  }
  EXPECT_EQ(live_transient(Device::meta()), meta_before);
}

TEST(Meta, OpsOnMetaTensorsGiveShapesAndGradientsWithoutComputing) {
  const Tensor a = zeros({4, 3}, DType::Float32, Device::meta()).requires_grad_();
  const Tensor b = zeros({3, 5}, DType::Float32, Device::meta()).requires_grad_();
  const Tensor y = gelu(matmul(a, b));
  EXPECT_EQ(y.device(), Device::meta());
  EXPECT_EQ(y.shape(), (Shape{4, 5}));
  const Tensor loss = sum(y);
  loss.backward();
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(a.grad().device(), Device::meta());
  EXPECT_EQ(a.grad().shape(), (Shape{4, 3}));
  EXPECT_EQ(b.grad().shape(), (Shape{3, 5}));
}

TEST(Meta, OutsideAScopeAnOpGivenTwoDevicesNamesBoth) {
  const Tensor cpu = ones({2, 2});
  const Tensor meta = ones({2, 2}, DType::Float32, Device::meta());
  const std::string message = testing::error_of([&] { (void)add(cpu, meta); });
  EXPECT_TRUE(testing::contains(message, "different devices")) << message;
  EXPECT_TRUE(testing::contains(message, "cpu")) << message;
  EXPECT_TRUE(testing::contains(message, "meta")) << message;
}

TEST(Meta, AScopeReadsRealTensorsMakesMetaOnesAndChangesNothingReal) {
  Generator generator(7);
  const Tensor w = from_vector(std::vector<float>{1, -2, 3, -4, 5, -6}, {2, 3}).requires_grad_();
  const Tensor v = from_vector(std::vector<float>{1, 1}, {2, 1}).requires_grad_();
  const Tensor x = from_vector(std::vector<float>{0.5f, -1, 2, 0, 1, 1}, {3, 2});
  sum(matmul(w, x)).backward();  // w has a gradient already; v has none
  const std::vector<float> w_grad = w.grad().to_vector<float>();
  const uint64_t offset = generator.offset();
  const int64_t cpu_before = live_transient(Device::cpu());
  {
    MetaScope meta;
    EXPECT_TRUE(MetaScope::active());
    const Tensor h = mul(dropout(relu(matmul(w, x)), 0.5, true, generator), v);
    EXPECT_EQ(h.device(), Device::meta());
    EXPECT_EQ(h.shape(), (Shape{2, 2}));
    EXPECT_EQ(live_transient(Device::cpu()), cpu_before);  // nothing allocated on the CPU
    sum(h).backward();
  }
  EXPECT_FALSE(MetaScope::active());
  EXPECT_EQ(w.grad().to_vector<float>(), w_grad);  // no gradient added into a real one
  EXPECT_FALSE(v.grad().defined());                // nor made for a real leaf
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, -2, 3, -4, 5, -6}));
  EXPECT_EQ(generator.offset(), offset);  // the draw was not taken
}

// A copy to another device inside a rehearsal is a meta tensor too: nothing
// is copied (before, to() copied into the meta storage's null pointer).
TEST(Meta, ACopyInAScopeIsMetaWhateverTheDevice) {
  MetaScope meta;
  const Tensor copy = to(ones({2, 3}), Device::cuda(0));
  EXPECT_EQ(copy.device(), Device::meta());
  EXPECT_EQ(copy.shape(), (Shape{2, 3}));
}

}  // namespace
}  // namespace remat
