// causal_softmax: a hand case, zeros above the diagonal, bit-identity with
// masked_fill + softmax (forward and gradient, float32 and float64, T from 1
// to past 1024), float64 finite-difference gradients, a strided input, and
// the shape and dtype errors.
#include "ops/attention.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/gradcheck.h"

namespace remat {
namespace {

using testing::contains;
using testing::error_of;
using testing::random_leaf;

using testing::kInf;

TEST(CausalSoftmax, HandComputed) {
  // Rows of a (3, 3) matrix: [5] -> 1; [0, log 3] -> (1/4, 3/4); [log 2, 0, log 5] -> (2, 1, 5) / 8.
  const Tensor x = from_vector(std::vector<double>{5, 9, 9, 0, std::log(3.0), 9, std::log(2.0), 0, std::log(5.0)},
                               {3, 3});
  const std::vector<double> y = causal_softmax(x).to_vector<double>();
  const std::vector<double> expected{1, 0, 0, 0.25, 0.75, 0, 2.0 / 8, 1.0 / 8, 5.0 / 8};
  ASSERT_EQ(y.size(), expected.size());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected[i], 1e-15) << "element " << i;
}

TEST(CausalSoftmax, ExactlyZeroAboveTheDiagonalEvenOverInfinities) {
  // Above the diagonal the input is never read: +inf and NaN there change nothing.
  const int64_t t = 5;
  Tensor x = normal({2, t, t}, 0.0, 2.0, DType::Float32);
  const std::vector<float> clean = causal_softmax(x).to_vector<float>();
  float* data = x.data<float>();
  for (int64_t m = 0; m < 2; ++m) {
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = i + 1; j < t; ++j) data[(m * t + i) * t + j] = (i + j) % 2 ? INFINITY : NAN;
    }
  }
  const std::vector<float> y = causal_softmax(x).to_vector<float>();
  for (int64_t m = 0; m < 2; ++m) {
    for (int64_t i = 0; i < t; ++i) {
      float total = 0;
      for (int64_t j = 0; j < t; ++j) {
        const size_t at = static_cast<size_t>((m * t + i) * t + j);
        EXPECT_EQ(y[at], clean[at]) << "row " << i << " column " << j;
        if (j > i) {
          EXPECT_EQ(std::bit_cast<uint32_t>(y[at]), 0u) << "row " << i << " column " << j << " is not +0";
        }
        total += y[at];
      }
      EXPECT_NEAR(total, 1.0f, 1e-6f) << "row " << i;
    }
  }
}

// causal_softmax(x) against softmax(masked_fill(x, causal_mask, -inf)) and
// their gradients, bit for bit: GPT's losses and gradients did not change
// when it moved to causal_softmax.
template <class T>
void expect_bits_of_masked_softmax(const Shape& shape, uint64_t seed) {
  SCOPED_TRACE(str(shape) + (sizeof(T) == 4 ? " float32" : " float64"));
  Generator g(seed);
  const Tensor x0 = normal(shape, 0.0, 3.0, dtype_of<T>(), g);
  const Tensor weights = normal(shape, 0.0, 1.0, dtype_of<T>(), g);
  const Tensor fused_x = x0.detach().requires_grad_(), masked_x = x0.detach().requires_grad_();
  const int64_t t = shape.back();
  const Tensor fused = causal_softmax(fused_x);
  const Tensor masked = softmax(masked_fill(masked_x, causal_mask(t), -kInf), -1);
  const auto same_bits = [](const Tensor& a, const Tensor& b, const char* what) {
    const std::vector<T> va = a.to_vector<T>(), vb = b.to_vector<T>();
    ASSERT_EQ(va.size(), vb.size());
    for (size_t i = 0; i < va.size(); ++i) {
      ASSERT_EQ(std::memcmp(&va[i], &vb[i], sizeof(T)), 0) << what << " at " << i << ": " << va[i] << " against "
                                                           << vb[i];
    }
  };
  same_bits(fused, masked, "forward");
  sum(mul(fused, weights)).backward();
  sum(mul(masked, weights)).backward();
  same_bits(fused_x.grad(), masked_x.grad(), "gradient");
}

TEST(CausalSoftmax, BitIdenticalToMaskedFillAndSoftmax) {
  for (const Shape& shape : std::vector<Shape>{{1, 1}, {3, 7, 7}, {2, 3, 64, 64}, {2, 33, 33}, {1, 1030, 1030}}) {
    expect_bits_of_masked_softmax<float>(shape, 7);
    expect_bits_of_masked_softmax<double>(shape, 8);
  }
}

TEST(CausalSoftmax, GradientsMatchFiniteDifferences) {
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return causal_softmax(x[0]); },
                         (Tensors{random_leaf({2, 3, 5, 5}, -2, 2, 3)}));
  // A strided input (the transpose of the last two axes): made dense first.
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return causal_softmax(transpose(x[0], -2, -1)); },
                         (Tensors{random_leaf({3, 4, 4}, -2, 2, 4)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return causal_softmax(x[0]); }, (Tensors{random_leaf({1, 1}, -2, 2, 5)}));
}

TEST(CausalSoftmax, EmptyMatricesGiveAnEmptyResult) {
  EXPECT_EQ(causal_softmax(zeros({2, 0, 0})).shape(), (Shape{2, 0, 0}));
}

TEST(CausalSoftmax, NamesTheShapeOrDtypeItCannotTake) {
  const std::string square = error_of([] { (void)causal_softmax(zeros({2, 4, 5})); });
  EXPECT_TRUE(contains(square, "square") && contains(square, "(2, 4, 5)")) << square;
  const std::string axes = error_of([] { (void)causal_softmax(zeros({4})); });
  EXPECT_TRUE(contains(axes, "(..., T, T)") && contains(axes, "(4)")) << axes;
  const std::string scalar = error_of([] { (void)causal_softmax(zeros({})); });
  EXPECT_TRUE(contains(scalar, "(..., T, T)")) << scalar;
  const std::string dtype = error_of([] { (void)causal_softmax(zeros({3, 3}, DType::Int64)); });
  EXPECT_TRUE(contains(dtype, "int64") && contains(dtype, "(3, 3)")) << dtype;
}

}  // namespace
}  // namespace remat
