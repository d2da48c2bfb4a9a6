// Linear: parameters, PyTorch's init bounds, parameter bytes, forward,
// gradients through the module, errors.
#include "nn/linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/allocator.h"
#include "ops/ops.h"
#include "tests/support/gradcheck.h"

namespace remat::nn {
namespace {

using remat::testing::random_leaf;

int64_t live(MemoryCategory c) { return cpu_allocator().stats().live_of(c); }

TEST(Linear, ParametersAndShapes) {
  Linear fc(3, 5);
  ASSERT_EQ(fc.named_parameters().size(), 2u);
  EXPECT_EQ(fc.named_parameters()[0].first, "weight");
  EXPECT_EQ(fc.named_parameters()[1].first, "bias");
  EXPECT_EQ(fc.weight().shape(), (Shape{5, 3}));
  EXPECT_EQ(fc.bias().shape(), (Shape{5}));
  EXPECT_EQ(fc.num_parameters(), 20);
  EXPECT_EQ(fc.type_name(), "Linear");
  EXPECT_EQ(fc.weight().dtype(), DType::Float32);

  Linear no_bias(3, 5, false);
  EXPECT_FALSE(no_bias.bias().defined());
  EXPECT_EQ(no_bias.num_parameters(), 15);
}

TEST(Linear, InitWithinPyTorchBounds) {
  Generator generator(7);
  Linear fc(400, 300, true, generator);
  const double bound = 1.0 / std::sqrt(400.0);  // 0.05
  for (const Tensor& p : {fc.weight(), fc.bias()}) {
    double lo = 1, hi = -1, total = 0;
    for (float v : p.to_vector<float>()) {
      lo = std::min<double>(lo, v);
      hi = std::max<double>(hi, v);
      total += v;
    }
    EXPECT_GE(lo, -bound);
    EXPECT_LT(hi, bound);
    EXPECT_LT(lo, -0.9 * bound);  // spread over the whole interval
    EXPECT_GT(hi, 0.9 * bound);
    EXPECT_LT(std::abs(total / static_cast<double>(p.numel())), 0.1 * bound);
  }
}

TEST(Linear, SameSeedSameWeights) {
  Generator g1(3), g2(3), g3(4);
  Linear a(4, 6, true, g1), b(4, 6, true, g2), c(4, 6, true, g3);
  EXPECT_EQ(a.weight().to_vector<float>(), b.weight().to_vector<float>());
  EXPECT_EQ(a.bias().to_vector<float>(), b.bias().to_vector<float>());
  EXPECT_NE(a.weight().to_vector<float>(), c.weight().to_vector<float>());
}

TEST(Linear, ParameterBytesAreExact) {
  const int64_t param_before = live(MemoryCategory::Parameter);
  const int64_t act_before = live(MemoryCategory::Activation);
  {
    Linear fc(784, 256);
    EXPECT_EQ(live(MemoryCategory::Parameter) - param_before, (784 * 256 + 256) * 4);
    EXPECT_EQ(live(MemoryCategory::Activation), act_before);  // none made on the way
    Linear fc64(10, 3, false, default_generator(), DType::Float64);
    EXPECT_EQ(live(MemoryCategory::Parameter) - param_before, (784 * 256 + 256) * 4 + 30 * 8);
  }
  EXPECT_EQ(live(MemoryCategory::Parameter), param_before);
}

TEST(Linear, ForwardMatchesTheOp) {
  Linear fc(4, 3);
  const Tensor x = randn({2, 5, 4});
  const Tensor y = fc.forward(x);
  EXPECT_EQ(y.shape(), (Shape{2, 5, 3}));
  EXPECT_EQ(y.to_vector<float>(), linear(x, fc.weight(), fc.bias()).to_vector<float>());
  EXPECT_TRUE(y.requires_grad());
}

TEST(Linear, ForwardHandComputed) {
  Linear fc(2, 1);
  {
    NoGradGuard no_grad;
    fc.weight().data<float>()[0] = 2;
    fc.weight().data<float>()[1] = -1;
    fc.bias().data<float>()[0] = 0.5f;
  }
  const Tensor x = from_vector(std::vector<float>{1, 3, 4, 1}, {2, 2});
  EXPECT_EQ(fc.forward(x).to_vector<float>(), (std::vector<float>{-0.5f, 7.5f}));
}

// Copies src's values into the module's parameter dst unless they are the
// same tensor: gradcheck perturbs copies of its inputs, and the module reads
// its own parameters, so the perturbed values are loaded before each forward.
void load(const Tensor& dst, const Tensor& src) {
  if (dst.impl() == src.impl()) return;
  std::memcpy(dst.raw_data(), contiguous_copy(src).raw_data(), dst.nbytes());
}

TEST(Linear, GradientsFloat64) {
  Generator generator(11);
  Linear fc(4, 3, true, generator, DType::Float64);
  const Tensor x = random_leaf({2, 4}, -1, 1, 5);
  EXPECT_GRADIENTS_MATCH(
      [&](const Tensors& in) {
        load(fc.weight(), in[1]);
        load(fc.bias(), in[2]);
        return fc.forward(in[0]);
      },
      (Tensors{x, fc.weight(), fc.bias()}));
}

TEST(Linear, BackwardFillsParameterGradients) {
  Linear fc(3, 2);
  sum(fc.forward(ones({4, 3}))).backward();
  ASSERT_TRUE(fc.weight().grad().defined());
  EXPECT_EQ(fc.weight().grad().storage()->category(), MemoryCategory::Gradient);
  EXPECT_EQ(fc.bias().grad().to_vector<float>(), (std::vector<float>{4, 4}));
  EXPECT_EQ(fc.weight().grad().to_vector<float>(), (std::vector<float>(6, 4.0f)));
}

TEST(Linear, WrongInputNamesSizes) {
  Linear fc(4, 3);
  try {
    fc.forward(zeros({2, 5}));
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("Linear(4, 3)"), std::string::npos) << message;
    EXPECT_NE(message.find("(2, 5)"), std::string::npos) << message;
  }
  EXPECT_THROW(fc.forward(zeros({2, 4}, DType::Float64)), Error);
  EXPECT_THROW(Linear(-1, 3), Error);
}

}  // namespace
}  // namespace remat::nn
