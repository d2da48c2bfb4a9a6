// The unary ops: hand cases in float32 for each; then every op of the
// table (unary_ops()) through the same checks: float64 gradients against
// finite differences, float32 against float64, the same bits at any thread
// count, shape, dtype and name kept; operator- and inputs read through strides.
#include "ops/unary.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/cpu/parallel.h"
#include "ops/ops.h"
#include "tests/support/gradcheck.h"
#include "tests/support/thread_counts.h"

namespace remat {
namespace {

using testing::random_leaf;

void expect_floats_near(const std::vector<float>& actual, const std::vector<float>& expected, float tol = 1e-6f) {
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
  expect_floats_near(tanh(inputs()).to_vector<float>(), {-0.96402758f, -0.46211716f, 0, 0.46211716f, 0.99505475f});
}

TEST(Unary, Sigmoid) {
  // 1 / (1 + e^-x): sigmoid(0) = 1/2, sigmoid(-x) = 1 - sigmoid(x)
  expect_floats_near(sigmoid(inputs()).to_vector<float>(), {0.11920292f, 0.37754067f, 0.5f, 0.62245933f, 0.95257413f});
  // Saturates without NaN at large |x|.
  const std::vector<float> big = sigmoid(from_vector(std::vector<float>{-200, 200}, {2})).to_vector<float>();
  EXPECT_EQ(big, (std::vector<float>{0, 1}));
}

TEST(Unary, Exp) {
  // e = 2.7182818, e^-2 = 0.13533528, e^3 = 20.085537
  expect_floats_near(exp(inputs()).to_vector<float>(), {0.13533528f, 0.60653066f, 1, 1.64872127f, 20.085537f}, 1e-5f);
}

TEST(Unary, Log) {
  // log(1) = 0, log(e) = 1, log(1/4) = -2 log 2
  const Tensor x = from_vector(std::vector<float>{1, 2.7182818f, 0.25f, 8}, {4});
  expect_floats_near(log(x).to_vector<float>(), {0, 1, -1.3862944f, 2.0794415f});
  EXPECT_EQ(log(from_vector(std::vector<float>{0}, {1})).item<float>(), -INFINITY);
}

// GELU's tanh approximation evaluated in double, straight from the formula.
double gelu_reference(double x) {
  const double u = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

TEST(Unary, Gelu) {
  // gelu(0) = 0; gelu(1) = 0.5 (1 + tanh(sqrt(2/pi) 1.044715)) = 0.8411919906...;
  // gelu(x) - gelu(-x) = x (so gelu(0.5) - gelu(-0.5) = 0.5); gelu(3) is within 0.004 of 3.
  const Tensor x = from_vector(std::vector<float>{-2, -0.5f, 0, 0.5f, 1, 3}, {6});
  const std::vector<float> y = gelu(x).to_vector<float>();
  expect_floats_near(y, {-0.04540230591f, -0.15428599017f, 0, 0.34571400983f, 0.84119199061f, 2.99636260792f});
  EXPECT_NEAR(gelu_reference(1.0), 0.8411919906082768, 1e-15);
  EXPECT_NEAR(y[3] - y[1], 0.5f, 1e-6f);
  const std::vector<double> xd{-2, -0.5, 0, 0.5, 1, 3};
  const std::vector<double> yd = gelu(from_vector(xd, {6})).to_vector<double>();
  for (size_t i = 0; i < xd.size(); ++i) EXPECT_NEAR(yd[i], gelu_reference(xd[i]), 1e-15) << xd[i];
}

TEST(Unary, GeluHandComputedGradient) {
  // d gelu/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2), t = tanh(u):
  // 1/2 at 0, 1.0829640838... at 1, -0.0860992566... at -2.
  Tensor x = from_vector(std::vector<double>{0, 1, -2}, {3}).requires_grad_();
  sum(gelu(x)).backward();
  const std::vector<double> g = x.grad().to_vector<double>();
  EXPECT_DOUBLE_EQ(g[0], 0.5);
  EXPECT_NEAR(g[1], 1.0829640838457826, 1e-14);
  EXPECT_NEAR(g[2], -0.08609925662361825, 1e-14);
}

TEST(Unary, GeluFloat32AgreesWithFloat64) {
  // Large enough for the threaded path; values across [-6, 6) including both tails.
  const int64_t n = 70001;
  const Tensor x64 = uniform({n}, -6.0, 6.0, DType::Float64);
  const Tensor x32 = to_dtype(x64, DType::Float32);
  const std::vector<double> y64 = gelu(x64).to_vector<double>();
  const std::vector<float> y32 = gelu(x32).to_vector<float>();
  const std::vector<double> xs = x64.to_vector<double>();
  for (size_t i = 0; i < y64.size(); ++i) {
    ASSERT_NEAR(y64[i], gelu_reference(xs[i]), 1e-14) << xs[i];
    ASSERT_NEAR(y32[i], y64[i], 2e-6 * std::max(1.0, std::abs(y64[i]))) << xs[i];
  }
  // The backward too: the same dout through both dtypes.
  Tensor a = to_dtype(x64, DType::Float64), b = to_dtype(x64, DType::Float32);
  a.requires_grad_();
  b.requires_grad_();
  sum(gelu(a)).backward();
  sum(gelu(b)).backward();
  const std::vector<double> ga = a.grad().to_vector<double>();
  const std::vector<float> gb = b.grad().to_vector<float>();
  for (size_t i = 0; i < ga.size(); ++i) ASSERT_NEAR(gb[i], ga[i], 2e-6) << xs[i];
}

TEST(Unary, Silu) {
  // silu(x) = x / (1 + e^-x): silu(0) = 0, silu(1) = 0.7310585786..., silu(-2) = -2 / (1 + e^2);
  // far out, -0 and x itself, never NaN.
  const Tensor x = from_vector(std::vector<float>{-2, -0.5f, 0, 0.5f, 1, 3, -200, 200}, {8});
  expect_floats_near(silu(x).to_vector<float>(),
              {-0.23840584404f, -0.18877033440f, 0, 0.31122966560f, 0.73105857863f, 2.85772238047f, 0, 200});
  // d silu/dx = s (1 + x (1 - s)): 1/2 at 0, 0.9276705118... at 1, -0.0907842487... at -2.
  Tensor xd = from_vector(std::vector<double>{0, 1, -2, 3}, {4}).requires_grad_();
  sum(silu(xd)).backward();
  const std::vector<double> g = xd.grad().to_vector<double>();
  EXPECT_DOUBLE_EQ(g[0], 0.5);
  EXPECT_NEAR(g[1], 0.9276705118714869, 1e-15);
  EXPECT_NEAR(g[2], -0.09078424878489547, 1e-15);
  EXPECT_NEAR(g[3], 1.0881041060151693, 1e-15);
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
  expect_floats_near(e, {std::exp(1.0f), std::exp(-4.0f), std::exp(-2.0f), std::exp(5.0f), std::exp(3.0f), std::exp(-6.0f)},
              1e-4f);
}

TEST(Unary, LargeTensorsTakeTheThreadedPath) {
  // Two threads even where OMP_NUM_THREADS=1, so the split loops really run.
  const kernels::cpu::NumThreadsGuard two_threads(2);
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
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return -x[0]; }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return gelu(x[0]); }, (Tensors{random_leaf({2, 5}, -5, 5, 7)}));
}

TEST(Unary, GradientsThroughTransposedView) {
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return tanh(transpose(x[0], 0, 1)); },
                         (Tensors{random_leaf({3, 4})}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return log(transpose(x[0], 0, 1)); },
                         (Tensors{random_leaf({2, 3}, 0.5, 2.0)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return sigmoid(exp(x[0])); }, (Tensors{random_leaf({4})}));
}

// Every op of the table, one test each (named by the op).
class EveryUnaryOp : public ::testing::TestWithParam<UnaryOp> {};

// Float64 values of `shape` from the op's domain, requiring grad.
Tensor domain_leaf(const UnaryOp& op, const Shape& shape, uint64_t seed) {
  const Tensor x = random_leaf(shape, op.domain.low, op.domain.high, seed);
  if (!op.domain.kink_at_zero) return x;
  std::vector<double> v = x.to_vector<double>();
  for (double& e : v) {
    if (std::abs(e) < 0.1) e += e < 0 ? -0.1 : 0.1;  // away from the kink
  }
  return from_vector(v, shape).requires_grad_();
}

TEST_P(EveryUnaryOp, GradientMatchesFiniteDifferencesInFloat64) {
  const UnaryOp op = GetParam();
  const auto f = [fn = op.fn](const Tensors& x) { return fn(x[0]); };
  EXPECT_GRADIENTS_MATCH(f, (Tensors{domain_leaf(op, {3, 4}, 1)}));
  EXPECT_GRADIENTS_MATCH(f, (Tensors{domain_leaf(op, {2, 5}, 7)}));
  // Read through a transposed view.
  EXPECT_GRADIENTS_MATCH([fn = op.fn](const Tensors& x) { return fn(transpose(x[0], 0, 1)); },
                         (Tensors{domain_leaf(op, {3, 4}, 3)}));
}

// Float32 (fast_math.h's exp and tanh; the lanes, the padded tail and the
// threaded chunks where the math runs there) against float64, forward and
// backward, on 70001 elements.
TEST_P(EveryUnaryOp, Float32AgreesWithFloat64) {
  const UnaryOp op = GetParam();
  const kernels::cpu::NumThreadsGuard two_threads(2);
  const int64_t n = 70001;
  Tensor a = uniform({n}, op.domain.low, op.domain.high, DType::Float64);
  Tensor b = to_dtype(a, DType::Float32);
  a = to_dtype(b, DType::Float64).requires_grad_();  // the same values in both
  b.requires_grad_();
  const Tensor ya = op.fn(a), yb = op.fn(b);
  const Tensor weights = uniform({n}, -1, 1, DType::Float64);
  sum(mul(ya, weights)).backward();
  sum(mul(yb, to_dtype(weights, DType::Float32))).backward();
  const std::vector<double> x = a.to_vector<double>(), y64 = ya.to_vector<double>(), g64 = a.grad().to_vector<double>();
  const std::vector<float> y32 = yb.to_vector<float>(), g32 = b.grad().to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(y32[i], y64[i], 4e-6 * std::max(1.0, std::abs(y64[i]))) << op.name << " at x = " << x[i];
    ASSERT_NEAR(g32[i], g64[i], 4e-6 * std::max(1.0, std::abs(g64[i]))) << op.name << "' at x = " << x[i];
  }
}

TEST_P(EveryUnaryOp, KeepsShapeDtypeAndItsName) {
  const UnaryOp op = GetParam();
  const Tensor x = domain_leaf(op, {2, 3, 1}, 5);
  const Tensor y = op.fn(x);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(y.dtype(), DType::Float64);
  ASSERT_TRUE(y.grad_fn());
  EXPECT_EQ(y.grad_fn()->name(), op.name);  // the table's name is the node's, which profiles and plans show
}

// Every op of the table, forward and backward, at 1, 2 and 3 threads bit
// for bit: 70001 elements split into chunks of kParallelGrain, read at an
// offset of 3 elements (a slice), so that the vector loops start off the
// alignment of the output.
TEST_P(EveryUnaryOp, BitsDoNotDependOnTheThreadCount) {
  const UnaryOp op = GetParam();
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    Generator g(61);
    const int64_t n = 70001;
    const Tensor base = uniform({n + 3}, op.domain.low, op.domain.high, dtype, g);
    const Tensor dy = uniform({n}, -1, 1, dtype, g);
    testing::expect_bits_independent_of_threads(std::string(op.name) + " " + std::string(dtype_name(dtype)), [&] {
      Tensor leaf = base.detach().requires_grad_();
      const Tensor y = op.fn(slice(leaf, 0, 3, n + 3));
      sum(y * dy).backward();
      return Tensors{y, leaf.grad()};
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Table, EveryUnaryOp, ::testing::ValuesIn(unary_ops().begin(), unary_ops().end()),
                         [](const ::testing::TestParamInfo<UnaryOp>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace remat
