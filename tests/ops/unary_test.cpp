// neg, relu, tanh, sigmoid, exp, log: hand cases in float32, gradients in
// float64, operator- and inputs read through strides.
#include "ops/unary.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "ops/ops.h"
#include "tests/support/gradcheck.h"

namespace remat {
namespace {

using testing::random_leaf;

void expect_near(const std::vector<float>& actual, const std::vector<float>& expected, float tol = 1e-6f) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], tol) << "element " << i;
}

Tensor inputs() { return from_vector(std::vector<float>{-2, -0.5f, 0, 0.5f, 3}, {5}); }

TEST(Unary, Neg) {
  EXPECT_EQ(neg(inputs()).to_vector<float>(), (std::vector<float>{2, 0.5f, 0, -0.5f, -3}));
  EXPECT_EQ((-inputs()).to_vector<float>(), (std::vector<float>{2, 0.5f, 0, -0.5f, -3}));
}

TEST(Unary, Relu) {
  EXPECT_EQ(relu(inputs()).to_vector<float>(), (std::vector<float>{0, 0, 0, 0.5f, 3}));
}

TEST(Unary, Tanh) {
  // tanh(x) = (e^2x - 1) / (e^2x + 1); tanh(0.5) = 0.46211716, tanh(-2) = -0.96402758
  expect_near(tanh(inputs()).to_vector<float>(), {-0.96402758f, -0.46211716f, 0, 0.46211716f, 0.99505475f});
}

TEST(Unary, Sigmoid) {
  // 1 / (1 + e^-x): sigmoid(0) = 1/2, sigmoid(-x) = 1 - sigmoid(x)
  expect_near(sigmoid(inputs()).to_vector<float>(), {0.11920292f, 0.37754067f, 0.5f, 0.62245933f, 0.95257413f});
  // Saturates without NaN at large |x|.
  const std::vector<float> big = sigmoid(from_vector(std::vector<float>{-200, 200}, {2})).to_vector<float>();
  EXPECT_EQ(big, (std::vector<float>{0, 1}));
}

TEST(Unary, Exp) {
  // e = 2.7182818, e^-2 = 0.13533528, e^3 = 20.085537
  expect_near(exp(inputs()).to_vector<float>(), {0.13533528f, 0.60653066f, 1, 1.64872127f, 20.085537f}, 1e-5f);
}

TEST(Unary, Log) {
  // log(1) = 0, log(e) = 1, log(1/4) = -2 log 2
  const Tensor x = from_vector(std::vector<float>{1, 2.7182818f, 0.25f, 8}, {4});
  expect_near(log(x).to_vector<float>(), {0, 1, -1.3862944f, 2.0794415f});
  EXPECT_EQ(log(from_vector(std::vector<float>{0}, {1})).item<float>(), -INFINITY);
}

TEST(Unary, KeepsShapeAndDtype) {
  const Tensor x = zeros({2, 3, 1}, DType::Float64);
  for (const Tensor& y : {neg(x), relu(x), tanh(x), sigmoid(x), exp(x)}) {
    EXPECT_EQ(y.shape(), (Shape{2, 3, 1}));
    EXPECT_EQ(y.dtype(), DType::Float64);
  }
}

TEST(Unary, NonContiguousInput) {
  // x = [[1, 2, 3], [4, 5, 6]]; x^T = [[1, 4], [2, 5], [3, 6]] is a strided view.
  const Tensor x = from_vector(std::vector<float>{1, -2, 3, -4, 5, -6}, {2, 3});
  const Tensor t = transpose(x, 0, 1);
  ASSERT_FALSE(t.is_contiguous());
  const Tensor r = relu(t);
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{1, 0, 0, 5, 3, 0}));
  EXPECT_EQ(neg(t).to_vector<float>(), (std::vector<float>{-1, 4, 2, -5, -3, 6}));
  const std::vector<float> e = exp(t).to_vector<float>();
  expect_near(e, {std::exp(1.0f), std::exp(-4.0f), std::exp(-2.0f), std::exp(5.0f), std::exp(3.0f), std::exp(-6.0f)},
              1e-4f);
}

TEST(Unary, LargeTensorsTakeTheThreadedPath) {
  // Two threads even where OMP_NUM_THREADS=1, so the split loops really run.
  const int threads_before = kernels::cpu::num_threads();
  kernels::cpu::set_num_threads(2);
  struct Restore { int n; ~Restore() { kernels::cpu::set_num_threads(n); } } restore{threads_before};
  const int64_t n = 70001;
  std::vector<float> values(static_cast<size_t>(n));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 11) - 5;
  const std::vector<float> r = relu(from_vector(values, {n})).to_vector<float>();
  const std::vector<float> e = neg(from_vector(values, {n})).to_vector<float>();
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(r[i], values[i] > 0 ? values[i] : 0) << i;
    ASSERT_EQ(e[i], -values[i]) << i;
  }
}

TEST(Unary, NonContiguousInputRecordsOneNode) {
  // The copy that makes the input dense is part of the op, not a node of its
  // own: the unary node directly follows the transpose in recording order.
  Tensor x = random_leaf({2, 3});
  const Tensor t = transpose(x, 0, 1);
  const Tensor y = tanh(t);
  ASSERT_TRUE(t.grad_fn() && y.grad_fn());
  EXPECT_EQ(y.grad_fn()->record().sequence_nr, t.grad_fn()->record().sequence_nr + 1);
  EXPECT_EQ(y.grad_fn()->next_edges().at(0).node, t.grad_fn());
}

TEST(Unary, HandComputedGradients) {
  // d relu(x)/dx = [x > 0]; d exp(x)/dx = exp(x); d log(x)/dx = 1/x
  Tensor x = from_vector(std::vector<double>{-1, 2, 4}, {3}).requires_grad_();
  sum(relu(x)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 1, 1}));
  x.set_grad(Tensor());
  sum(log(x + 2.0)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 0.25, 1.0 / 6}));
  x.set_grad(Tensor());
  sum(neg(x)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{-1, -1, -1}));
  x.set_grad(Tensor());
  sum(tanh(x * 0.0)).backward();  // 1 - tanh(0)^2 = 1, times d(0 x)/dx = 0
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0, 0}));
  Tensor z = from_vector(std::vector<double>{0}, {1}).requires_grad_();
  sum(sigmoid(z)).backward();  // s(0) (1 - s(0)) = 1/4
  EXPECT_DOUBLE_EQ(z.grad().item<double>(), 0.25);
}

TEST(Unary, Gradients) {
  const Tensors in{random_leaf({3, 4}, -2, 2)};
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return neg(x[0]); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return -x[0]; }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return tanh(x[0]); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return sigmoid(x[0]); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return exp(x[0]); }, in);
}

TEST(Unary, GradientsReluAwayFromZero) {
  // Values in [0.1, 1) shifted to both signs: no element within 0.1 of the kink.
  const Tensor positive = from_vector(std::vector<double>{0.3, -0.7, 0.9, -0.2, 0.5, -0.4}, {2, 3});
  Tensor x = contiguous_copy(positive);
  x.requires_grad_();
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return relu(v[0]); }, (Tensors{x}));
}

TEST(Unary, GradientsLogPositive) {
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return log(x[0]); }, (Tensors{random_leaf({3, 4}, 0.5, 3.0)}));
}

TEST(Unary, GradientsThroughTransposedView) {
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return tanh(transpose(x[0], 0, 1)); },
                         (Tensors{random_leaf({3, 4})}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return log(transpose(x[0], 0, 1)); },
                         (Tensors{random_leaf({2, 3}, 0.5, 2.0)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return sigmoid(exp(x[0])); }, (Tensors{random_leaf({4})}));
}

}  // namespace
}  // namespace remat
