// rotary: a hand case; the op against a reference composed of slice,
// concat, neg, mul and add with a cos/sin table built here by a plain loop
// (Hugging Face's steps in the tensor's dtype), values and gradients, in
// float64 and float32, on strided views of a projection and edge shapes;
// float64 gradient checks; bits at one and two threads; errors.
#include "ops/rotary.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/gradcheck.h"

namespace remat {
namespace {

using testing::random_leaf;

using testing::expect_close;

// cos or sin of the angles, (T, D) = cat(freqs, freqs), in T's arithmetic:
// inv_freq_i = 1 / theta^((2i) / D), angle = t * inv_freq_i.
template <class T>
Tensor angle_table(int64_t len, int64_t dim, double theta, bool sine) {
  std::vector<T> values(static_cast<size_t>(len * dim));
  for (int64_t t = 0; t < len; ++t) {
    for (int64_t i = 0; i < dim / 2; ++i) {
      const T inv_freq = T(1) / std::pow(static_cast<T>(theta), static_cast<T>(2 * i) / static_cast<T>(dim));
      const T angle = static_cast<T>(t) * inv_freq;
      const T v = sine ? std::sin(angle) : std::cos(angle);
      values[static_cast<size_t>(t * dim + i)] = v;
      values[static_cast<size_t>(t * dim + i + dim / 2)] = v;
    }
  }
  return from_vector(values, {len, dim});
}

// x cos + rotate_half(x) sin from existing ops, rotate_half(x) = cat(-x2, x1).
Tensor rotary_reference(const Tensor& x, double theta) {
  const int64_t len = x.size(2), dim = x.size(3), half = dim / 2;
  const bool f32 = x.dtype() == DType::Float32;
  const Tensor cos = f32 ? angle_table<float>(len, dim, theta, false) : angle_table<double>(len, dim, theta, false);
  const Tensor sin = f32 ? angle_table<float>(len, dim, theta, true) : angle_table<double>(len, dim, theta, true);
  const Tensor rotated = concat({neg(slice(x, 3, half, dim)), slice(x, 3, 0, half)}, 3);
  return add(mul(x, cos), mul(rotated, sin));
}

TEST(Rotary, HandComputed) {
  // D = 4, theta = 100: inv_freq = (1, 100^(-1/2)) = (1, 0.1). Position 0
  // is the identity; at t = 2 the pairs (x0, x2) and (x1, x3) turn by 2
  // and 0.2 radians: (x0 c - x2 s, x1 c' - x3 s', x2 c + x0 s, x3 c' + x1 s').
  const Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 0, 0, 0, 0, 1, 2, 3, 4}, {1, 1, 3, 4});
  const std::vector<double> y = rotary(x, 100.0).to_vector<double>();
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(y[i], static_cast<double>(i + 1)) << i;
  const double c2 = std::cos(2.0), s2 = std::sin(2.0), c02 = std::cos(0.2), s02 = std::sin(0.2);
  const std::vector<double> expected{1 * c2 - 3 * s2, 2 * c02 - 4 * s02, 3 * c2 + 1 * s2, 4 * c02 + 2 * s02};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(y[8 + i], expected[i], 1e-15) << i;
}

// The op against rotary_reference from the same leaf (read through `view`):
// values and the gradient.
void expect_rotary_matches_reference(const Tensor& leaf, double theta, double tol,
                              const std::function<Tensor(const Tensor&)>& view) {
  const Tensor y = rotary(view(leaf), theta), y_ref = rotary_reference(contiguous(view(leaf)), theta);
  expect_close(y, y_ref, tol, "y");
  EXPECT_TRUE(y.is_contiguous());
  const Tensor dy = uniform(y.shape(), -1, 1, y.dtype());
  sum(y * dy).backward();
  const Tensor dx = leaf.grad();
  leaf.set_grad(Tensor());
  sum(y_ref * dy).backward();
  expect_close(dx, leaf.grad(), tol, "dx");
}

using testing::kAsIs;

TEST(Rotary, MatchesTheReference) {
  // Odd B, H and T; D = 2 (one frequency); T = 1 (position 0 only: identity).
  for (const Shape& shape : {Shape{2, 3, 5, 8}, Shape{3, 1, 7, 2}, Shape{1, 2, 1, 6}, Shape{1, 1, 300, 64}}) {
    SCOPED_TRACE(str(shape));
    expect_rotary_matches_reference(random_leaf(shape, -2, 2, 1), 10000.0, 1e-14, kAsIs);
    Generator g(2);
    expect_rotary_matches_reference(uniform(shape, -2, 2, DType::Float32, g).requires_grad_(), 500000.0, 2e-6, kAsIs);
  }
}

TEST(Rotary, Float64KeepsItsPrecisionAtLongPositions) {
  // Angles up to 4095 radians: float32 steps would be off by ~1e-4 there; the
  // float64 path computes them in float64 and matches the float64 table.
  expect_rotary_matches_reference(random_leaf({1, 2, 4096, 16}, -1, 1, 3), 10000.0, 1e-12, kAsIs);
  const Tensor x = random_leaf({1, 1, 4096, 16}, -1, 1, 4).detach();
  const Tensor y32 = rotary(to_dtype(x, DType::Float32)), y64 = rotary(x);
  expect_close(y32, y64, 1e-2, "float32 near float64");  // rounding of t * inv_freq in float32
}

TEST(Rotary, ReadsStridedViewsInPlace) {
  // q and k of a (B, T, 3 C) projection, viewed (B, T, H, D) and
  // transposed to (B, H, T, D): last axis contiguous, the others strided.
  const int64_t b = 2, t = 5, h = 3, d = 8, c = h * d;
  const auto q_of = [=](const Tensor& qkv) { return transpose(view(slice(qkv, 2, 0, c), {b, t, h, d}), 1, 2); };
  const auto k_of = [=](const Tensor& qkv) { return transpose(view(slice(qkv, 2, c, 2 * c), {b, t, h, d}), 1, 2); };
  expect_rotary_matches_reference(random_leaf({b, t, 3 * c}, -2, 2, 5), 10000.0, 1e-14, q_of);
  expect_rotary_matches_reference(random_leaf({b, t, 3 * c}, -2, 2, 6), 10000.0, 1e-14, k_of);
  // A last axis that is not contiguous (D strided): copied first.
  expect_rotary_matches_reference(random_leaf({2, 3, 6, 4}, -2, 2, 7), 10000.0, 1e-14,
                           [](const Tensor& x) { return transpose(x, 2, 3); });
}

TEST(Rotary, Gradients) {
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return rotary(v[0]); }, (Tensors{random_leaf({2, 3, 4, 6}, -2, 2, 8)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return rotary(v[0], 7.0); },
                         (Tensors{random_leaf({1, 2, 1, 2}, -2, 2, 9)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return rotary(transpose(view(v[0], {2, 3, 2, 4}), 1, 2), 50.0); },
                         (Tensors{random_leaf({2, 3, 8}, -2, 2, 10)}));
}

// Forward and backward at one thread and at two, bit for bit (q's W4 shape).
template <class T>
void expect_rotary_bits_independent_of_threads(DType dtype) {
  Generator g(11);
  const Tensor x = uniform({8, 6, 256, 64}, -2, 2, dtype, g), dy = uniform({8, 6, 256, 64}, -1, 1, dtype, g);
  std::vector<T> y[2], dx[2];
  for (const int threads : {1, 2}) {
    const kernels::cpu::NumThreadsGuard guard(threads);
    Tensor leaf = x.detach().requires_grad_();
    const Tensor out = rotary(leaf);
    sum(out * dy).backward();
    y[threads - 1] = out.to_vector<T>();
    dx[threads - 1] = leaf.grad().to_vector<T>();
  }
  EXPECT_EQ(y[0], y[1]) << dtype_name(dtype);
  EXPECT_EQ(dx[0], dx[1]) << dtype_name(dtype);
}

TEST(Rotary, BitsDoNotDependOnTheThreadCount) {
  expect_rotary_bits_independent_of_threads<float>(DType::Float32);
  expect_rotary_bits_independent_of_threads<double>(DType::Float64);
}

TEST(Rotary, SavesNothingAndIsMemoryBound) {
  const Tensor y = rotary(random_leaf({2, 3, 4, 8}, -1, 1, 12));
  const NodeRecord& record = y.grad_fn()->record();
  EXPECT_EQ(record.op, "rotary");
  EXPECT_TRUE(record.saved.empty());
  EXPECT_EQ(record.flops, 3 * 2 * 3 * 4 * 8);
  EXPECT_FALSE(record.compute_bound);
}

TEST(Rotary, ErrorsNameTheShape) {
  const std::string rank = testing::error_of([] { rotary(zeros({2, 4, 8})); });
  EXPECT_TRUE(testing::contains(rank, "rotary")) << rank;
  EXPECT_TRUE(testing::contains(rank, "(2, 4, 8)")) << rank;
  const std::string odd = testing::error_of([] { rotary(zeros({1, 2, 3, 5})); });
  EXPECT_TRUE(testing::contains(odd, "(1, 2, 3, 5)")) << odd;
  EXPECT_TRUE(testing::contains(odd, "even")) << odd;
  const std::string theta = testing::error_of([] { rotary(zeros({1, 1, 2, 4}), 0.0); });
  EXPECT_TRUE(testing::contains(theta, "theta")) << theta;
}

}  // namespace
}  // namespace remat
