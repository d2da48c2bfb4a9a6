// add, sub, mul, div: hand cases, broadcasting, scalar forms, operators,
// gradients (with broadcast operands), the same bits at any thread count,
// and the errors for dtype and shape mixes.
#include "ops/binary.h"

#include <gtest/gtest.h>

#include <string>

#include "kernels/cpu/parallel.h"
#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/gradcheck.h"
#include "tests/support/thread_counts.h"

namespace remat {
namespace {

using testing::contains;
using testing::error_of;
using testing::random_leaf;

// [[1, 2, 3], [4, 5, 6]]
Tensor a23() { return from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}); }

TEST(Binary, HandComputedSameShape) {
  const Tensor a = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  const Tensor b = from_vector(std::vector<float>{8, 4, 2, 1}, {2, 2});
  EXPECT_EQ(add(a, b).to_vector<float>(), (std::vector<float>{9, 6, 5, 5}));
  EXPECT_EQ(sub(a, b).to_vector<float>(), (std::vector<float>{-7, -2, 1, 3}));
  EXPECT_EQ(mul(a, b).to_vector<float>(), (std::vector<float>{8, 8, 6, 4}));
  EXPECT_EQ(div(a, b).to_vector<float>(), (std::vector<float>{0.125f, 0.5f, 1.5f, 4}));
  EXPECT_EQ(add(a, b).shape(), (Shape{2, 2}));
}

TEST(Binary, BroadcastRowVector) {
  // (2,3) + (3): the row is added to each row.
  const Tensor b = from_vector(std::vector<float>{10, 20, 30}, {3});
  const Tensor c = add(a23(), b);
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  // And the other way round: (3) - (2,3).
  EXPECT_EQ(sub(b, a23()).to_vector<float>(), (std::vector<float>{9, 18, 27, 6, 15, 24}));
}

TEST(Binary, BroadcastColumnTimesRow) {
  // (2,1) * (1,3) -> (2,3), an outer product.
  const Tensor col = from_vector(std::vector<float>{2, 3}, {2, 1});
  const Tensor row = from_vector(std::vector<float>{1, 10, 100}, {1, 3});
  const Tensor c = mul(col, row);
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{2, 20, 200, 3, 30, 300}));
  const Tensor d = div(row, col);
  EXPECT_EQ(d.shape(), (Shape{2, 3}));
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{0.5f, 5, 50, 1.0f / 3, 10.0f / 3, 100.0f / 3}));
}

TEST(Binary, ZeroDimOperands) {
  const Tensor s = scalar_tensor(2.0);
  EXPECT_EQ(s.dim(), 0);
  const Tensor c = mul(a23(), s);
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  const Tensor d = sub(s, a23());
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{1, 0, -1, -2, -3, -4}));
  const Tensor both = add(s, scalar_tensor(5.0));
  EXPECT_EQ(both.dim(), 0);
  EXPECT_EQ(both.item<float>(), 7.0f);
}

TEST(Binary, ScalarForms) {
  const Tensor x = from_vector(std::vector<float>{1, 2, 4}, {3});
  EXPECT_EQ(add(x, 1.5).to_vector<float>(), (std::vector<float>{2.5f, 3.5f, 5.5f}));
  EXPECT_EQ(sub(x, 1.0).to_vector<float>(), (std::vector<float>{0, 1, 3}));
  EXPECT_EQ(mul(x, -2.0).to_vector<float>(), (std::vector<float>{-2, -4, -8}));
  EXPECT_EQ(div(x, 4.0).to_vector<float>(), (std::vector<float>{0.25f, 0.5f, 1}));
  // The scalar on the left is not the same as on the right.
  EXPECT_EQ(sub(2.0, x).to_vector<float>(), (std::vector<float>{1, 0, -2}));
  EXPECT_EQ(div(1.0, x).to_vector<float>(), (std::vector<float>{1, 0.5f, 0.25f}));
  // The scalar takes the tensor's dtype.
  const Tensor y = from_vector(std::vector<double>{1, 2}, {2});
  EXPECT_EQ(add(y, 0.1).dtype(), DType::Float64);
  EXPECT_EQ(add(y, 0.1).to_vector<double>(), (std::vector<double>{1 + 0.1, 2 + 0.1}));
  EXPECT_EQ(div(1.0, y).dtype(), DType::Float64);
}

TEST(Binary, Operators) {
  const Tensor a = from_vector(std::vector<float>{1, 2}, {2});
  const Tensor b = from_vector(std::vector<float>{4, 8}, {2});
  EXPECT_EQ((a + b).to_vector<float>(), (std::vector<float>{5, 10}));
  EXPECT_EQ((a - b).to_vector<float>(), (std::vector<float>{-3, -6}));
  EXPECT_EQ((a * b).to_vector<float>(), (std::vector<float>{4, 16}));
  EXPECT_EQ((a / b).to_vector<float>(), (std::vector<float>{0.25f, 0.25f}));
  EXPECT_EQ((a + 1.0).to_vector<float>(), (std::vector<float>{2, 3}));
  EXPECT_EQ((a - 1.0).to_vector<float>(), (std::vector<float>{0, 1}));
  EXPECT_EQ((a * 3.0).to_vector<float>(), (std::vector<float>{3, 6}));
  EXPECT_EQ((a / 2.0).to_vector<float>(), (std::vector<float>{0.5f, 1}));
  EXPECT_EQ((1.0 + a).to_vector<float>(), (std::vector<float>{2, 3}));
  EXPECT_EQ((2.0 - a).to_vector<float>(), (std::vector<float>{1, 0}));
  EXPECT_EQ((3.0 * a).to_vector<float>(), (std::vector<float>{3, 6}));
  EXPECT_EQ((1.0 / a).to_vector<float>(), (std::vector<float>{1, 0.5f}));
}

TEST(Binary, NonContiguousOperand) {
  // a23()^T = [[1,4],[2,5],[3,6]], read through strides.
  const Tensor t = transpose(a23(), 0, 1);
  const Tensor b = from_vector(std::vector<float>{1, 1, 2, 2, 3, 3}, {3, 2});
  EXPECT_EQ(mul(t, b).to_vector<float>(), (std::vector<float>{1, 4, 4, 10, 9, 18}));
}

TEST(Binary, LargeTensorsTakeTheThreadedPaths) {
  // Two threads even where OMP_NUM_THREADS=1, so the split loops really run.
  const kernels::cpu::NumThreadsGuard two_threads(2);
  // Above 2 * kParallelGrain elements the kernel splits rows (or one long
  // row) across threads; every element must still be computed once.
  const int64_t n = 70001;
  std::vector<float> values(static_cast<size_t>(n));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000);
  const Tensor x = from_vector(values, {n});
  const std::vector<float> shifted = sub(3.0, x).to_vector<float>();  // one long row, scalar on the left
  ASSERT_EQ(shifted.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(shifted[i], 3 - values[i]) << i;

  // (2, 40000) * (40000) and (40000, 1) * (1, 2): many rows, broadcast operands.
  const int64_t m = 40000;
  std::vector<float> row(static_cast<size_t>(m));
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<float>(i % 7);
  const Tensor r = from_vector(row, {m});
  const Tensor two = from_vector(std::vector<float>{1, 2}, {2, 1});
  const std::vector<float> p = mul(expand(two, {2, m}), r).to_vector<float>();
  for (size_t j = 0; j < 2; ++j) {
    for (size_t i = 0; i < row.size(); ++i) ASSERT_EQ(p[j * row.size() + i], static_cast<float>(j + 1) * row[i]);
  }
  const std::vector<float> q = add(view(r, {m, 1}), from_vector(std::vector<float>{10, 20}, {1, 2})).to_vector<float>();
  for (size_t i = 0; i < row.size(); ++i) {
    ASSERT_EQ(q[2 * i], row[i] + 10) << i;
    ASSERT_EQ(q[2 * i + 1], row[i] + 20) << i;
  }
}

TEST(Binary, HandComputedGradients) {
  // d(a*b)/da = b, d(a*b)/db = a, summed over the broadcast axis for b.
  Tensor a = from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor b = from_vector(std::vector<double>{5, 7}, {2}).requires_grad_();
  sum(mul(a, b)).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{5, 7, 5, 7}));
  EXPECT_EQ(b.grad().shape(), (Shape{2}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{1 + 3, 2 + 4}));

  // d(a/b)/db = -a/b^2
  Tensor x = from_vector(std::vector<double>{3}, {1}).requires_grad_();
  Tensor y = from_vector(std::vector<double>{2}, {1}).requires_grad_();
  sum(div(x, y)).backward();
  EXPECT_DOUBLE_EQ(x.grad().item<double>(), 0.5);
  EXPECT_DOUBLE_EQ(y.grad().item<double>(), -3.0 / 4.0);
}

TEST(Binary, SameTensorOnBothSides) {
  // d(x*x)/dx = 2x, d(x+x)/dx = 2, d(x-x)/dx = 0, d(x/x)/dx = 0: both edges reach x.
  Tensor x = from_vector(std::vector<double>{1, -2, 3}, {3}).requires_grad_();
  sum(mul(x, x)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, -4, 6}));
  x.set_grad(Tensor());
  sum(add(x, x)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 2, 2}));
  x.set_grad(Tensor());
  sum(sub(x, x)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0, 0}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return div(v[0], v[0] * v[0] + 1.0); }, (Tensors{random_leaf({5})}));
}

TEST(Binary, GradientsSameShape) {
  const Tensors in{random_leaf({3, 4}), random_leaf({3, 4}, 0.5, 2.0, 2)};
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return add(x[0], x[1]); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return sub(x[0], x[1]); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return mul(x[0], x[1]); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return div(x[0], x[1]); }, in);
}

TEST(Binary, GradientsBroadcast) {
  // (2,3) with (3), (2,1) with (1,3), (2,3) with 0-d; divisors kept away from 0.
  const std::vector<Tensors> cases{
      {random_leaf({2, 3}), random_leaf({3}, 0.5, 2.0, 2)},
      {random_leaf({2, 1}, 0.5, 2.0, 3), random_leaf({1, 3}, 0.5, 2.0, 4)},
      {random_leaf({2, 3}), random_leaf({}, 0.5, 2.0, 5)},
      {random_leaf({4, 1, 3}), random_leaf({2, 1}, 0.5, 2.0, 6)},
  };
  for (const Tensors& in : cases) {
    EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return add(x[0], x[1]); }, in);
    EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return sub(x[0], x[1]); }, in);
    EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return mul(x[0], x[1]); }, in);
    EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return div(x[0], x[1]); }, in);
    // Broadcast on the left operand too.
    EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return sub(x[1], x[0]); }, in);
    EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return mul(x[1], x[0]); }, in);
  }
}

TEST(Binary, GradientsScalarForms) {
  const Tensors in{random_leaf({2, 3}, 0.5, 2.0)};
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return add(x[0], 3.0); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return sub(2.0, x[0]); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return mul(x[0], -1.5); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return div(1.0, x[0]); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return div(x[0], 4.0); }, in);
}

TEST(Binary, GradientsOnlyOneInputRequiresGrad) {
  const Tensor fixed = from_vector(std::vector<double>{0.5, 1.5, 2.5}, {3});
  Tensor a = random_leaf({2, 3});
  EXPECT_GRADIENTS_MATCH([&](const Tensors& x) { return mul(x[0], fixed); }, (Tensors{a}));
  EXPECT_GRADIENTS_MATCH([&](const Tensors& x) { return div(fixed, x[0] + 3.0); }, (Tensors{a}));
  EXPECT_GRADIENTS_MATCH([&](const Tensors& x) { return div(x[0], fixed); }, (Tensors{a}));
  EXPECT_GRADIENTS_MATCH([&](const Tensors& x) { return sub(fixed, x[0]); }, (Tensors{a}));
}

TEST(Binary, DtypeMixNamesBothDtypes) {
  const std::string message = error_of([] { add(zeros({2}), zeros({2}, DType::Float64)); });
  EXPECT_NE(message.find("float32"), std::string::npos) << message;
  EXPECT_NE(message.find("float64"), std::string::npos) << message;
  EXPECT_NE(message.find("add"), std::string::npos) << message;
  EXPECT_THROW(mul(zeros({2}, DType::Float64), zeros({2})), Error);
}

TEST(Binary, IncompatibleBroadcastNamesBothShapes) {
  const std::string message = error_of([] { mul(zeros({2, 3}), zeros({4, 5})); });
  EXPECT_NE(message.find("(2, 3)"), std::string::npos) << message;
  EXPECT_NE(message.find("(4, 5)"), std::string::npos) << message;
  EXPECT_NE(message.find("mul"), std::string::npos) << message;
  EXPECT_THROW(add(zeros({3}), zeros({2, 2})), Error);
}

// add, sub, mul, div and their gradients at 1, 2 and 3 threads bit for
// bit: one long row of 70001 elements read at an offset of 3 (chunks of
// kParallelGrain), and rows of (512, 300) against a broadcast (300), whose
// gradient is a sum over the rows.
TEST(Binary, BitsDoNotDependOnTheThreadCount) {
  using Fn = Tensor (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, Fn> fns[] = {{"add", &add}, {"sub", &sub}, {"mul", &mul}, {"div", &div}};
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    Generator g(62);
    const int64_t n = 70001;
    const Tensor a_long = uniform({n + 3}, 0.5, 2, dtype, g), b_long = uniform({n}, 0.5, 2, dtype, g);
    const Tensor a_rows = uniform({512, 300}, 0.5, 2, dtype, g), b_row = uniform({300}, 0.5, 2, dtype, g);
    const Tensor dy_long = uniform({n}, -1, 1, dtype, g), dy_rows = uniform({512, 300}, -1, 1, dtype, g);
    for (const auto& [name, op] : fns) {
      const auto& fn = op;  // a lambda may not capture a structured binding (clang 14)
      const std::string what = std::string(name) + " " + std::string(dtype_name(dtype));
      testing::expect_bits_independent_of_threads(what + " one row", [&] {
        Tensor a = a_long.detach().requires_grad_(), b = b_long.detach().requires_grad_();
        const Tensor y = fn(slice(a, 0, 3, n + 3), b);
        sum(y * dy_long).backward();
        return Tensors{y, a.grad(), b.grad()};
      });
      testing::expect_bits_independent_of_threads(what + " broadcast", [&] {
        Tensor a = a_rows.detach().requires_grad_(), b = b_row.detach().requires_grad_();
        const Tensor y = fn(a, b);
        sum(y * dy_rows).backward();
        return Tensors{y, a.grad(), b.grad()};
      });
    }
  }
}

}  // namespace
}  // namespace remat
