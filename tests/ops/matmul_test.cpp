// matmul, linear and affine: hand cases, gradients, transposed views, errors,
// and the same bits at any thread count.
#include "ops/matmul.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/gradcheck.h"
#include "tests/support/thread_counts.h"

namespace remat {
namespace {

using testing::random_leaf;

TEST(Matmul, HandComputed2D) {
  const Tensor a = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = from_vector(std::vector<float>{7, 8, 9, 10, 11, 12}, {3, 2});
  const Tensor c = matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{2, 2}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{58, 64, 139, 154}));
}

TEST(Matmul, TransposedViewNeedsNoCopy) {
  const Tensor a = from_vector(std::vector<float>{1, 4, 2, 5, 3, 6}, {3, 2});  // a^T = [[1,2,3],[4,5,6]]
  const Tensor b = from_vector(std::vector<float>{7, 8, 9, 10, 11, 12}, {3, 2});
  const int64_t before = cpu_allocator().stats().allocations;
  const Tensor c = matmul(transpose(a, 0, 1), b);
  EXPECT_EQ(cpu_allocator().stats().allocations - before, 1);  // the output only
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{58, 64, 139, 154}));
}

TEST(Matmul, BatchedWithBroadcast) {
  const Tensor a = from_vector(std::vector<float>{1, 0, 0, 1, 2, 0, 0, 2}, {2, 2, 2});  // I and 2I
  const Tensor b = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  const Tensor c = matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 2, 4, 6, 8}));
  const Tensor d = matmul(b, a);  // (2,2) @ (2,2,2)
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 2, 4, 6, 8}));
}

TEST(Matmul, Gradients) {
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return matmul(x[0], x[1]); },
                         (Tensors{random_leaf({3, 4}), random_leaf({4, 5}, -1, 1, 2)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return matmul(x[0], x[1]); },
                         (Tensors{random_leaf({2, 3, 4}), random_leaf({4, 2}, -1, 1, 2)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return matmul(x[0], transpose(x[1], -1, -2)); },
                         (Tensors{random_leaf({2, 1, 3, 4}), random_leaf({3, 5, 4}, -1, 1, 2)}));
}

TEST(Matmul, ScaleMultipliesTheProduct) {
  const Tensor a = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = from_vector(std::vector<float>{7, 8, 9, 10, 11, 12}, {3, 2});
  EXPECT_EQ(matmul(a, b, 0.5).to_vector<float>(), (std::vector<float>{29, 32, 69.5f, 77}));
  const Tensor batched = from_vector(std::vector<float>{1, 0, 0, 1, 2, 0, 0, 2}, {2, 2, 2});  // I and 2I
  EXPECT_EQ(matmul(batched, transpose(batched, -1, -2), -2.0).to_vector<float>(),
            (std::vector<float>{-2, 0, 0, -2, -8, 0, 0, -8}));
  // A power-of-two scale in GEMM gives the bits of a multiply after it.
  const Tensor x = uniform({4, 3, 8, 16}, -1, 1), y = uniform({4, 3, 16, 8}, -1, 1);
  EXPECT_EQ(matmul(x, y, 0.125).to_vector<float>(), mul(matmul(x, y), 0.125).to_vector<float>());
}

TEST(Matmul, ScaledGradients) {
  // d(sAB)/dA = s dC B^T, d(sAB)/dB = s A^T dC
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return matmul(x[0], x[1], 0.3); },
                         (Tensors{random_leaf({3, 4}), random_leaf({4, 5}, -1, 1, 2)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return matmul(x[0], transpose(x[1], -1, -2), -1.7); },
                         (Tensors{random_leaf({2, 1, 3, 4}), random_leaf({3, 5, 4}, -1, 1, 2)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return matmul(x[0], x[1], 2.5); },
                         (Tensors{random_leaf({2, 3, 4}), random_leaf({4, 2}, -1, 1, 2)}));
}

TEST(Matmul, NonFiniteScaleIsAnError) {
  try {
    matmul(zeros({2, 3}), zeros({3, 4}), std::nan(""));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scale nan"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(2, 3)"), std::string::npos) << e.what();
  }
}

TEST(Matmul, MismatchNamesBothShapes) {
  const Tensor a = zeros({2, 3});
  const Tensor b = zeros({4, 5});
  try {
    matmul(a, b);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 3)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(4, 5)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("matmul"), std::string::npos) << e.what();
  }
}

TEST(Matmul, DtypeMixIsAnError) {
  EXPECT_THROW(matmul(zeros({2, 2}), zeros({2, 2}, DType::Float64)), Error);
}

TEST(Linear, HandComputed) {
  const Tensor x = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  const Tensor w = from_vector(std::vector<float>{1, 0, 1, 1, 0, 2}, {3, 2});
  const Tensor b = from_vector(std::vector<float>{10, 20, 30}, {3});
  EXPECT_EQ(linear(x, w, b).to_vector<float>(), (std::vector<float>{11, 23, 34, 13, 27, 38}));
  EXPECT_EQ(linear(x, w).to_vector<float>(), (std::vector<float>{1, 3, 4, 3, 7, 8}));
}

TEST(Linear, Gradients) {
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return linear(x[0], x[1], x[2]); },
                         (Tensors{random_leaf({2, 3, 4}), random_leaf({5, 4}, -1, 1, 2), random_leaf({5}, -1, 1, 3)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return linear(x[0], x[1]); },
                         (Tensors{random_leaf({3, 4}), random_leaf({2, 4}, -1, 1, 2)}));
}

TEST(Matmul, EmptyInnerAxisGivesZeros) {
  const Tensor c = matmul(zeros({2, 0}), zeros({0, 3}));
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(c.to_vector<float>(), std::vector<float>(6, 0.0f));
  const Tensor batched = matmul(zeros({4, 2, 0}), zeros({0, 3}));
  EXPECT_EQ(batched.to_vector<float>(), std::vector<float>(24, 0.0f));
}

// BLAS takes sizes and leading dimensions as 32-bit ints, on both paths of
// matmul (one GEMM over rows, and one per batch element). Meta tensors have
// the shapes and strides without the bytes.
TEST(Matmul, SizesAndLeadingDimensionsPastInt32AreClearErrors) {
  const int64_t big = int64_t{1} << 31;  // INT32_MAX + 1
  const Device meta = Device::meta();
  // Batched, k too large.
  const std::string batched_k = testing::error_of(
      [&] { (void)matmul(zeros({2, 1, big}, DType::Float32, meta), zeros({2, big, 1}, DType::Float32, meta)); });
  EXPECT_TRUE(testing::contains(batched_k, "(2, 1, 2147483648)")) << batched_k;
  EXPECT_TRUE(testing::contains(batched_k, "(2, 2147483648, 1)")) << batched_k;
  EXPECT_TRUE(testing::contains(batched_k, "32-bit")) << batched_k;
  // Batched, rows of A a view of wider rows: its leading dimension too large.
  const Tensor wide = slice(zeros({2, 3, big + 8}, DType::Float32, meta), 2, 0, 4);  // (2, 3, 4)
  const std::string batched_ld =
      testing::error_of([&] { (void)matmul(wide, zeros({4, 5}, DType::Float32, meta)); });
  EXPECT_TRUE(testing::contains(batched_ld, "leading dimension 2147483656")) << batched_ld;
  EXPECT_TRUE(testing::contains(batched_ld, "(2, 3, 4)")) << batched_ld;
  // One GEMM over rows, B a view of wider rows.
  const Tensor wide_b = slice(zeros({4, big + 8}, DType::Float32, meta), 1, 0, 5);  // (4, 5)
  const std::string rows_ld =
      testing::error_of([&] { (void)matmul(zeros({3, 4}, DType::Float32, meta), wide_b); });
  EXPECT_TRUE(testing::contains(rows_ld, "leading dimension 2147483656")) << rows_ld;
  EXPECT_TRUE(testing::contains(rows_ld, "(4, 5)")) << rows_ld;
  // One GEMM over rows, more rows than an int holds.
  const std::string rows_m = testing::error_of(
      [&] { (void)matmul(zeros({big, 2}, DType::Float32, meta), zeros({2, 3}, DType::Float32, meta)); });
  EXPECT_TRUE(testing::contains(rows_m, "(2147483648, 2)")) << rows_m;
}

TEST(Linear, NoInputFeaturesGivesTheBias) {
  const Tensor b = from_vector(std::vector<float>{1, 2}, {2});
  EXPECT_EQ(linear(zeros({3, 0}), zeros({2, 0}), b).to_vector<float>(), (std::vector<float>{1, 2, 1, 2, 1, 2}));
}

TEST(Affine, HandComputed) {
  // W (in 2, out 3) = [[1, 1, 0], [0, 1, 2]]: x W for x = [[1, 2], [3, 4]] is [[1, 3, 4], [3, 7, 8]].
  const Tensor x = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  const Tensor w = from_vector(std::vector<float>{1, 1, 0, 0, 1, 2}, {2, 3});
  const Tensor b = from_vector(std::vector<float>{10, 20, 30}, {3});
  const Tensor y = affine(x, w, b);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{11, 23, 34, 13, 27, 38}));
  EXPECT_EQ(affine(x, w).to_vector<float>(), (std::vector<float>{1, 3, 4, 3, 7, 8}));
  // Leading axes are kept: (2, 1, 2) -> (2, 1, 3).
  EXPECT_EQ(affine(reshape(x, {2, 1, 2}), w, b).shape(), (Shape{2, 1, 3}));
}

TEST(Affine, HandComputedGradients) {
  // d sum(x W + b): dx[r, i] = sum_j W[i, j] = (2, 3); dW[i, j] = sum_r x[r, i] = (4, 6); db[j] = rows = 2.
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor w = from_vector(std::vector<double>{1, 1, 0, 0, 1, 2}, {2, 3}).requires_grad_();
  Tensor b = from_vector(std::vector<double>{10, 20, 30}, {3}).requires_grad_();
  sum(affine(x, w, b)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 3, 2, 3}));
  EXPECT_EQ(w.grad().shape(), (Shape{2, 3}));
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{4, 4, 4, 6, 6, 6}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{2, 2, 2}));
}

TEST(Affine, Gradients) {
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return affine(x[0], x[1], x[2]); },
                         (Tensors{random_leaf({2, 3, 4}), random_leaf({4, 5}, -1, 1, 2), random_leaf({5}, -1, 1, 3)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return affine(x[0], x[1]); },
                         (Tensors{random_leaf({3, 4}), random_leaf({4, 2}, -1, 1, 2)}));
}

TEST(Affine, EqualsLinearOfTheTransposedWeight) {
  // affine(x, W, b) == linear(x, W^T, b), values and gradients, to the last bit
  // up to GEMM's summation order (so compare to 1e-12 in float64).
  Tensor x1 = random_leaf({4, 3, 6}, -1, 1, 4), w1 = random_leaf({6, 5}, -1, 1, 5), b1 = random_leaf({5}, -1, 1, 6);
  Tensor x2 = contiguous_copy(x1), w2 = contiguous_copy(w1), b2 = contiguous_copy(b1);
  x2.requires_grad_();
  w2.requires_grad_();
  b2.requires_grad_();
  const Tensor dy = random_leaf({4, 3, 5}, -1, 1, 7).detach();
  const Tensor y1 = affine(x1, w1, b1);
  const Tensor y2 = linear(x2, transpose(w2, 0, 1), b2);
  ASSERT_EQ(y1.shape(), y2.shape());
  const auto expect_close = [](const Tensor& a, const Tensor& b) {
    const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
    ASSERT_EQ(va.size(), vb.size());
    for (size_t i = 0; i < va.size(); ++i) EXPECT_NEAR(va[i], vb[i], 1e-12) << "element " << i;
  };
  expect_close(y1, y2);
  sum(y1 * dy).backward();
  sum(y2 * dy).backward();
  expect_close(x1.grad(), x2.grad());
  EXPECT_EQ(w1.grad().shape(), (Shape{6, 5}));
  expect_close(w1.grad(), w2.grad());
  expect_close(b1.grad(), b2.grad());
}

TEST(Affine, WeightIsReadWithoutACopy) {
  const Tensor x = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  const Tensor w = from_vector(std::vector<float>{1, 1, 0, 0, 1, 2}, {2, 3});
  const int64_t before = cpu_allocator().stats().allocations;
  const Tensor y = affine(x, w);
  EXPECT_EQ(cpu_allocator().stats().allocations - before, 1);  // the output only
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 3, 4, 3, 7, 8}));
}

TEST(Affine, ShapeMismatchNamesBothShapes) {
  // A weight in linear's (out, in) layout is the usual mistake.
  const std::string message = testing::error_of([] { affine(zeros({2, 3}), zeros({4, 3})); });
  EXPECT_TRUE(testing::contains(message, "affine")) << message;
  EXPECT_TRUE(testing::contains(message, "(2, 3)")) << message;
  EXPECT_TRUE(testing::contains(message, "(4, 3)")) << message;
  const std::string bias = testing::error_of([] { affine(zeros({2, 3}), zeros({3, 4}), zeros({3})); });
  EXPECT_TRUE(testing::contains(bias, "affine")) << bias;
  EXPECT_TRUE(testing::contains(bias, "(3, 4)")) << bias;
}

// matmul (one large product, and a batch of small ones that threads split
// by matrix), linear, affine and affine_gelu with their bias gradients
// (sums over rows), values and gradients at 1, 2 and 3 threads bit for bit.
TEST(Matmul, BitsDoNotDependOnTheThreadCount) {
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    Generator g(66);
    const Tensor a = uniform({384, 256}, -1, 1, dtype, g), b = uniform({256, 320}, -1, 1, dtype, g);
    const Tensor qa = uniform({4, 12, 128, 64}, -1, 1, dtype, g), qb = uniform({4, 12, 64, 128}, -1, 1, dtype, g);
    const Tensor x = uniform({4, 128, 256}, -1, 1, dtype, g), w = uniform({320, 256}, -1, 1, dtype, g);
    const Tensor wt = uniform({256, 320}, -1, 1, dtype, g), bias = uniform({320}, -1, 1, dtype, g);
    const Tensor dy = uniform({384, 320}, -1, 1, dtype, g), dq = uniform({4, 12, 128, 128}, -1, 1, dtype, g);
    const Tensor dx = uniform({4, 128, 320}, -1, 1, dtype, g);
    testing::expect_bits_independent_of_threads("matmul " + std::string(dtype_name(dtype)), [&] {
      Tensor al = a.detach().requires_grad_(), bl = b.detach().requires_grad_();
      Tensor qal = qa.detach().requires_grad_(), qbl = qb.detach().requires_grad_();
      const Tensor y = matmul(al, bl), yq = matmul(qal, qbl);
      (sum(y * dy) + sum(yq * dq)).backward();
      return Tensors{y, yq, al.grad(), bl.grad(), qal.grad(), qbl.grad()};
    });
    testing::expect_bits_independent_of_threads("linear, affine, affine_gelu " + std::string(dtype_name(dtype)), [&] {
      Tensor xl = x.detach().requires_grad_(), wl = w.detach().requires_grad_(), wtl = wt.detach().requires_grad_();
      Tensor bl = bias.detach().requires_grad_();
      const Tensor y = linear(xl, wl, bl), ya = affine(xl, wtl, bl), yg = affine_gelu(xl, wtl, bl);
      (sum(y * dx) + sum(ya * dx) + sum(yg * dx)).backward();
      return Tensors{y, ya, yg, xl.grad(), wl.grad(), wtl.grad(), bl.grad()};
    });
  }
}

}  // namespace
}  // namespace remat
