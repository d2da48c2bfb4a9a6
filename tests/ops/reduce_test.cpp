// sum, mean, max, argmax: hand cases over all, one and several axes,
// keepdim and negative axes, ties, gradients, bad axes, and the same bits
// at any thread count.
#include "ops/reduce.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "ops/ops.h"
#include "tests/support/gradcheck.h"
#include "tests/support/thread_counts.h"

namespace remat {
namespace {

using testing::random_leaf;

// 0, 1, ..., n-1 as float32 in `shape`.
using testing::iota;

TEST(Sum, AllAxes) {
  const Tensor s = sum(iota({2, 3}));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<float>(), 15.0f);
  const Tensor k = sum(iota({2, 3}), {}, /*keepdim=*/true);
  EXPECT_EQ(k.shape(), (Shape{1, 1}));
  EXPECT_EQ(k.item<float>(), 15.0f);
}

TEST(Sum, OneAxis) {
  const Tensor x = iota({2, 3});  // [[0, 1, 2], [3, 4, 5]]
  EXPECT_EQ(sum(x, {0}).shape(), (Shape{3}));
  EXPECT_EQ(sum(x, {0}).to_vector<float>(), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ(sum(x, {1}).to_vector<float>(), (std::vector<float>{3, 12}));
  EXPECT_EQ(sum(x, {-1}).to_vector<float>(), (std::vector<float>{3, 12}));
  EXPECT_EQ(sum(x, {1}, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(sum(x, {-2}, true).shape(), (Shape{1, 3}));
}

TEST(Sum, SeveralAxes) {
  // x[i][j][k] = 12 i + 4 j + k
  const Tensor x = iota({2, 3, 4});
  // Over i and k: 4 * 12 + 8 * 4 j + 2 * 6 = 60 + 32 j
  EXPECT_EQ(sum(x, {0, 2}).to_vector<float>(), (std::vector<float>{60, 92, 124}));
  EXPECT_EQ(sum(x, {-1, 0}, true).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(sum(x, {-1, 0}, true).to_vector<float>(), (std::vector<float>{60, 92, 124}));
  // Over j and k: 12 * 12 i + 3 * 6 + 4 * (0 + 1 + 2) * 4 = 144 i + 66
  EXPECT_EQ(sum(x, {1, 2}).to_vector<float>(), (std::vector<float>{66, 210}));
  // Over i and j: 6 k + 3 * 12 + 2 * 4 * 3 = 6 k + 60
  EXPECT_EQ(sum(x, {0, 1}).to_vector<float>(), (std::vector<float>{60, 66, 72, 78}));
}

TEST(Sum, NonContiguousInput) {
  const Tensor t = transpose(iota({2, 3}), 0, 1);  // [[0, 3], [1, 4], [2, 5]]
  EXPECT_EQ(sum(t, {1}).to_vector<float>(), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ(sum(t, {0}).to_vector<float>(), (std::vector<float>{3, 12}));
}

TEST(Mean, AxesAndKeepdim) {
  const Tensor x = iota({2, 3});
  EXPECT_EQ(mean(x).item<float>(), 2.5f);
  EXPECT_EQ(mean(x, {0}).to_vector<float>(), (std::vector<float>{1.5f, 2.5f, 3.5f}));
  EXPECT_EQ(mean(x, {-1}, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(mean(x, {-1}, true).to_vector<float>(), (std::vector<float>{1, 4}));
  EXPECT_EQ(mean(iota({2, 3, 4}), {0, 2}).to_vector<float>(), (std::vector<float>{7.5f, 11.5f, 15.5f}));
}

TEST(Sum, HandComputedGradients) {
  // d sum(x)/dx = 1; d mean(x)/dx = 1 / count
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  sum(mul(sum(x, {1}), from_vector(std::vector<double>{1, 10}, {2}))).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 1, 1, 10, 10, 10}));
  x.set_grad(Tensor());
  mean(x, {0}).backward(ones({3}, DType::Float64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>(6, 0.5)));
}

TEST(Sum, LargeInput) {
  // (300, 300) of ones: each row and column sums to 300, the whole to 90000.
  const Tensor x = ones({300, 300}, DType::Float64);
  EXPECT_EQ(sum(x).item<double>(), 90000.0);
  EXPECT_EQ(sum(x, {0}).to_vector<double>(), (std::vector<double>(300, 300.0)));
  EXPECT_EQ(sum(transpose(x, 0, 1), {1}).to_vector<double>(), (std::vector<double>(300, 300.0)));
}

TEST(Max, ValuesAndIndices) {
  const Tensor x = from_vector(std::vector<float>{1, 5, 3, 7, 2, 4}, {2, 3});
  EXPECT_EQ(max(x, 1).to_vector<float>(), (std::vector<float>{5, 7}));
  EXPECT_EQ(max(x, 0).to_vector<float>(), (std::vector<float>{7, 5, 4}));
  EXPECT_EQ(max(x, -1, true).shape(), (Shape{2, 1}));
  const Tensor i = argmax(x, 1);
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmax(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(argmax(x, -2, true).shape(), (Shape{1, 3}));
}

TEST(Max, MiddleAxisAndNonContiguous) {
  // x[i][j][k] = 12 i + 4 j + k: the max over j is at j = 2.
  const Tensor x = iota({2, 3, 4});
  EXPECT_EQ(max(x, 1).to_vector<float>(), (std::vector<float>{8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>(8, 2)));
  const Tensor t = transpose(from_vector(std::vector<float>{1, 5, 3, 7, 2, 4}, {2, 3}), 0, 1);  // [[1,7],[5,2],[3,4]]
  EXPECT_EQ(max(t, 1).to_vector<float>(), (std::vector<float>{7, 5, 4}));
  EXPECT_EQ(argmax(t, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
}

TEST(Max, TiesGoToTheFirstElement) {
  const Tensor x = from_vector(std::vector<double>{2, 7, 7, 7, 1, 7}, {2, 3});
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmax(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0}));
  Tensor leaf = contiguous_copy(x);
  leaf.requires_grad_();
  sum(max(leaf, 1)).backward();
  EXPECT_EQ(leaf.grad().to_vector<double>(), (std::vector<double>{0, 1, 0, 1, 0, 0}));
  leaf.set_grad(Tensor());
  max(leaf, 0).backward(from_vector(std::vector<double>{10, 20, 30}, {3}));
  EXPECT_EQ(leaf.grad().to_vector<double>(), (std::vector<double>{0, 20, 30, 10, 0, 0}));
}

TEST(Reduce, Gradients) {
  const Tensors in{random_leaf({2, 3, 4})};
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return sum(x[0]); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return sum(x[0], {1}); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return sum(x[0], {0, -1}, true); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return mean(x[0]); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return mean(x[0], {-2}, true); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return mean(x[0], {0, 2}); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return sum(transpose(x[0], 0, 2), {1}); }, in);
  // Distinct random values: no ties within eps.
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return max(x[0], 1); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return max(x[0], -1, true); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return max(x[0], 0); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return max(transpose(x[0], 1, 2), 1); }, in);
}

TEST(Reduce, BadAxisIsAnError) {
  const Tensor x = zeros({2, 3});
  for (auto f : std::vector<std::function<void()>>{
           [&] { sum(x, {2}); }, [&] { sum(x, {-3}); }, [&] { mean(x, {5}); }, [&] { max(x, 2); },
           [&] { argmax(x, -3); }, [&] { sum(x, {0, 0}); }, [&] { sum(x, {1, -1}); }}) {
    EXPECT_THROW(f(), Error);
  }
  try {
    sum(x, {2});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("sum"), std::string::npos) << message;
    EXPECT_NE(message.find("2"), std::string::npos) << message;
  }
}

// sum and mean over all, the first and the last axes, and max along one,
// values and gradients, at 1, 2 and 3 threads bit for bit on (512, 300).
TEST(Reduce, BitsDoNotDependOnTheThreadCount) {
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    Generator g(65);
    const Tensor x = uniform({512, 300}, -1, 1, dtype, g);
    const Tensor dy0 = uniform({300}, -1, 1, dtype, g), dy1 = uniform({512}, -1, 1, dtype, g);
    testing::expect_bits_independent_of_threads("reductions " + std::string(dtype_name(dtype)), [&] {
      Tensor leaf = x.detach().requires_grad_();
      const Tensor all = sum(leaf), rows = sum(leaf, {0}), cols = mean(leaf, {1}), best = max(leaf, 1);
      (all + sum(rows * dy0) + sum(cols * dy1) + sum(best * dy1)).backward();
      return Tensors{all, rows, cols, best, leaf.grad()};
    });
  }
}

}  // namespace
}  // namespace remat
