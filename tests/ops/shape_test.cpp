// Shape ops: view, reshape, transpose, permute, slice, expand, contiguous,
// concat, sum_to_shape. Values, storage sharing of views, errors, gradients.
#include "ops/shape.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/allocator.h"
#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/gradcheck.h"

namespace remat {
namespace {

using testing::contains;
using testing::error_of;
using testing::random_leaf;

// 0, 1, ..., n-1 as float32 in `shape`.
using testing::iota;

int64_t allocations() { return cpu_allocator().stats().allocations; }

TEST(View, NewShapeSameElements) {
  const Tensor x = iota({2, 3});
  const int64_t before = allocations();
  const Tensor v = view(x, {3, 2});
  EXPECT_EQ(allocations(), before);
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  EXPECT_EQ(v.storage().get(), x.storage().get());
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST(View, InfersMinusOne) {
  const Tensor x = iota({2, 3, 4});
  EXPECT_EQ(view(x, {-1}).shape(), (Shape{24}));
  EXPECT_EQ(view(x, {4, -1}).shape(), (Shape{4, 6}));
  EXPECT_EQ(view(x, {2, -1, 3}).shape(), (Shape{2, 4, 3}));
  EXPECT_EQ(reshape(x, {-1, 2}).shape(), (Shape{12, 2}));
}

TEST(View, BadShapesNameBothShapes) {
  const Tensor x = iota({2, 3});
  std::string message = error_of([&] { view(x, {4, 2}); });
  EXPECT_TRUE(contains(message, "(2, 3)")) << message;
  EXPECT_TRUE(contains(message, "(4, 2)")) << message;
  message = error_of([&] { reshape(x, {4, -1}); });
  EXPECT_TRUE(contains(message, "(2, 3)")) << message;
  EXPECT_TRUE(contains(message, "(4, -1)")) << message;
  message = error_of([&] { view(x, {-1, -1}); });
  EXPECT_TRUE(contains(message, "(-1, -1)")) << message;
}

TEST(View, NonContiguousIsAnErrorThatSuggestsReshape) {
  const Tensor t = transpose(iota({2, 3}), 0, 1);
  const std::string message = error_of([&] { view(t, {6}); });
  EXPECT_TRUE(contains(message, "reshape")) << message;
}

TEST(View, SplitsAnAxisOfAStridedView) {
  // Columns 2..5 of a (2, 6) tensor: strides (6, 1), not contiguous, but its
  // last axis can still be split: (2, 4) -> (2, 2, 2) with strides (6, 2, 1).
  const Tensor s = slice(iota({2, 6}), 1, 2, 6);
  const Tensor v = view(s, {2, 2, 2});
  EXPECT_EQ(v.strides(), (Strides{6, 2, 1}));
  EXPECT_EQ(v.storage(), s.storage());
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{2, 3, 4, 5, 8, 9, 10, 11}));
  // Merging its two axes is impossible without a copy.
  EXPECT_THROW(view(s, {8}), Error);
  EXPECT_EQ(reshape(s, {8}).to_vector<float>(), (std::vector<float>{2, 3, 4, 5, 8, 9, 10, 11}));
}

TEST(View, ViewOfAnOffsetSlice) {
  // Rows 1..2 of a (3, 2) tensor are contiguous; a view keeps the offset.
  const Tensor s = slice(iota({3, 2}), 0, 1, 3);
  EXPECT_EQ(view(s, {4}).to_vector<float>(), (std::vector<float>{2, 3, 4, 5}));
}

TEST(Reshape, ContiguousIsAView) {
  const Tensor x = iota({2, 3});
  const int64_t before = allocations();
  const Tensor r = reshape(x, {6});
  EXPECT_EQ(allocations(), before);
  EXPECT_EQ(r.storage().get(), x.storage().get());
}

TEST(Reshape, NonContiguousCopies) {
  const Tensor x = iota({2, 3});
  const Tensor t = transpose(x, 0, 1);  // [[0, 3], [1, 4], [2, 5]]
  const int64_t before = allocations();
  const Tensor r = reshape(t, {6});
  EXPECT_EQ(allocations(), before + 1);
  EXPECT_NE(r.storage().get(), x.storage().get());
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Transpose, SwapsAxesAsAView) {
  const Tensor x = iota({2, 3});
  const int64_t before = allocations();
  const Tensor t = transpose(x, 0, 1);
  EXPECT_EQ(allocations(), before);
  EXPECT_EQ(t.storage().get(), x.storage().get());
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(transpose(x, -1, -2).to_vector<float>(), t.to_vector<float>());
  EXPECT_THROW(transpose(x, 0, 2), Error);
}

TEST(Permute, ReordersAxes) {
  const Tensor x = iota({2, 3, 4});
  const int64_t before = allocations();
  const Tensor p = permute(x, {2, 0, 1});
  EXPECT_EQ(allocations(), before);
  EXPECT_EQ(p.storage().get(), x.storage().get());
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  // p[k][i][j] = x[i][j][k] = 12 i + 4 j + k
  const std::vector<float> values = p.to_vector<float>();
  for (int k = 0; k < 4; ++k) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) EXPECT_EQ(values[static_cast<size_t>(k * 6 + i * 3 + j)], static_cast<float>(12 * i + 4 * j + k));
    }
  }
  EXPECT_THROW(permute(x, {0, 0, 1}), Error);
  EXPECT_THROW(permute(x, {0, 1}), Error);
}

TEST(Slice, StepNegativeStartAndClampedEnd) {
  const Tensor x = iota({10});
  const int64_t before = allocations();
  const Tensor s = slice(x, 0, 1, 8, 3);
  EXPECT_EQ(allocations(), before);
  EXPECT_EQ(s.storage().get(), x.storage().get());
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{1, 4, 7}));
  EXPECT_EQ(slice(x, 0, 1, 9, 3).to_vector<float>(), (std::vector<float>{1, 4, 7}));
  EXPECT_EQ(slice(x, 0, 1, 10, 3).to_vector<float>(), (std::vector<float>{1, 4, 7}));
  EXPECT_EQ(slice(x, 0, -3, 10).to_vector<float>(), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(slice(x, 0, 7, 100).to_vector<float>(), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(slice(x, 0, 2, -5).to_vector<float>(), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(slice(x, 0, 5, 5).numel(), 0);
  EXPECT_EQ(slice(x, 0, 6, 2).numel(), 0);
  EXPECT_THROW(slice(x, 0, 11, 12), Error);
  EXPECT_THROW(slice(x, 0, 0, 5, 0), Error);
}

TEST(Slice, AlongInnerAxis) {
  const Tensor x = iota({3, 4});  // rows [0..3], [4..7], [8..11]
  const Tensor s = slice(x, 1, 1, 4, 2);
  EXPECT_EQ(s.shape(), (Shape{3, 2}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11}));
  EXPECT_EQ(slice(x, -1, -1, 4).to_vector<float>(), (std::vector<float>{3, 7, 11}));
}

TEST(Slice, HandComputedGradient) {
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5}, {5}).requires_grad_();
  sum(mul(slice(x, 0, 0, 5, 2), 3.0)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3, 0, 3, 0, 3}));
}

TEST(Expand, BroadcastsWithoutCopying) {
  const Tensor x = from_vector(std::vector<float>{1, 2}, {2, 1});
  const int64_t before = allocations();
  const Tensor e = expand(x, {3, 2, 3});
  EXPECT_EQ(allocations(), before);
  EXPECT_EQ(e.storage().get(), x.storage().get());
  EXPECT_EQ(e.shape(), (Shape{3, 2, 3}));
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2}));
  const std::string message = error_of([&] { expand(x, {3, 3}); });
  EXPECT_TRUE(contains(message, "(2, 1)")) << message;
  EXPECT_TRUE(contains(message, "(3, 3)")) << message;
  EXPECT_THROW(expand(x, {2}), Error);
}

TEST(Expand, HandComputedGradient) {
  // d expand(x)/dx sums the gradient over the broadcast copies.
  Tensor x = from_vector(std::vector<double>{1, 2}, {2, 1}).requires_grad_();
  sum(expand(x, {4, 2, 3})).backward();
  EXPECT_EQ(x.grad().shape(), (Shape{2, 1}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{12, 12}));
}

TEST(Contiguous, ReturnsItselfOrACopy) {
  const Tensor x = iota({2, 3});
  const int64_t before = allocations();
  const Tensor same = contiguous(x);
  EXPECT_EQ(allocations(), before);
  EXPECT_EQ(same.impl(), x.impl());
  const Tensor t = transpose(x, 0, 1);
  const Tensor c = contiguous(t);
  EXPECT_EQ(allocations(), before + 1);
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_NE(c.storage().get(), x.storage().get());
  EXPECT_EQ(c.strides(), (Strides{2, 1}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Concat, AlongAxis0And1) {
  const Tensor a = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  const Tensor b = from_vector(std::vector<float>{5, 6}, {1, 2});
  const Tensor c0 = concat({a, b}, 0);
  EXPECT_EQ(c0.shape(), (Shape{3, 2}));
  EXPECT_EQ(c0.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const Tensor d = from_vector(std::vector<float>{7, 8, 9, 10, 11, 12}, {2, 3});
  const Tensor c1 = concat({a, d}, 1);
  EXPECT_EQ(c1.shape(), (Shape{2, 5}));
  EXPECT_EQ(c1.to_vector<float>(), (std::vector<float>{1, 2, 7, 8, 9, 3, 4, 10, 11, 12}));
  EXPECT_EQ(concat({a, d}, -1).to_vector<float>(), c1.to_vector<float>());
  // A transposed (non-contiguous) input is read through its strides.
  const Tensor c2 = concat({transpose(a, 0, 1), b}, 0);
  EXPECT_EQ(c2.to_vector<float>(), (std::vector<float>{1, 3, 2, 4, 5, 6}));
}

TEST(Concat, ShapeMismatchNamesBothShapes) {
  const Tensor a = zeros({2, 2});
  const Tensor b = zeros({2, 3});
  const std::string message = error_of([&] { concat({a, b}, 0); });
  EXPECT_TRUE(contains(message, "(2, 2)")) << message;
  EXPECT_TRUE(contains(message, "(2, 3)")) << message;
  EXPECT_EQ(concat({a, b}, 1).shape(), (Shape{2, 5}));
  EXPECT_THROW(concat({a, zeros({4})}, 0), Error);
  EXPECT_THROW(concat({}, 0), Error);
}

TEST(SumToShape, SumsBroadcastAxes) {
  const Tensor x = iota({2, 3});
  EXPECT_EQ(sum_to_shape(x, {3}).to_vector<float>(), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ(sum_to_shape(x, {1, 3}).shape(), (Shape{1, 3}));
  EXPECT_EQ(sum_to_shape(x, {1, 3}).to_vector<float>(), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ(sum_to_shape(x, {2, 1}).to_vector<float>(), (std::vector<float>{3, 12}));
  EXPECT_EQ(sum_to_shape(x, {}).item<float>(), 15.0f);
  EXPECT_EQ(sum_to_shape(x, {2, 3}).to_vector<float>(), x.to_vector<float>());
  const Tensor y = iota({2, 3, 4});
  // Over axes 0 and 2: element j is the sum of 12 i + 4 j + k over i < 2, k < 4 = 60 + 32 j.
  EXPECT_EQ(sum_to_shape(y, {3, 1}).to_vector<float>(), (std::vector<float>{60, 92, 124}));
}

TEST(ShapeOps, LargeCopiesAndSliceGradient) {
  // 300 x 300: the strided copy of contiguous() and the gradient scatter of
  // slice() run on several threads.
  const Tensor x = iota({300, 300});
  const std::vector<float> t = contiguous(transpose(x, 0, 1)).to_vector<float>();
  for (size_t i = 0; i < 300; ++i) {
    for (size_t j = 0; j < 300; ++j) ASSERT_EQ(t[i * 300 + j], static_cast<float>(j * 300 + i)) << i << " " << j;
  }
  Tensor leaf = zeros({300, 300}, DType::Float64);
  leaf.requires_grad_();
  sum(slice(leaf, 1, 1, 300, 2)).backward();
  const std::vector<double> g = leaf.grad().to_vector<double>();
  for (size_t i = 0; i < 300; ++i) {
    for (size_t j = 0; j < 300; ++j) ASSERT_EQ(g[i * 300 + j], j % 2 == 1 ? 1.0 : 0.0) << i << " " << j;
  }
}

TEST(ShapeOps, Gradients) {
  const Tensor x = random_leaf({2, 3, 4});
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return view(v[0], {6, -1}); }, (Tensors{x}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return reshape(v[0], {4, 6}); }, (Tensors{x}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return reshape(transpose(v[0], 0, 2), {-1}); }, (Tensors{x}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return transpose(v[0], 1, 2); }, (Tensors{x}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return permute(v[0], {2, 0, 1}); }, (Tensors{x}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return slice(v[0], 2, 1, 4, 2); }, (Tensors{x}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return slice(v[0], 0, -1, 10); }, (Tensors{x}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return slice(transpose(v[0], 0, 1), 1, 1, 2); }, (Tensors{x}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return contiguous(permute(v[0], {1, 2, 0})); }, (Tensors{x}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return sum_to_shape(v[0], {3, 1}); }, (Tensors{x}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return sum_to_shape(v[0], {4}); }, (Tensors{x}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return expand(v[0], {2, 2, 3}); },
                         (Tensors{random_leaf({2, 1, 3})}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return expand(v[0], {2, 3, 4}); }, (Tensors{random_leaf({4})}));
}

TEST(Concat, Gradients) {
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return concat(v, 0); },
                         (Tensors{random_leaf({2, 3}), random_leaf({1, 3}, -1, 1, 2), random_leaf({3, 3}, -1, 1, 3)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return concat(v, 1); },
                         (Tensors{random_leaf({2, 3}), random_leaf({2, 1}, -1, 1, 2)}));
  // Only one input requires grad.
  const Tensor fixed = from_vector(std::vector<double>{1, 2}, {2, 1});
  EXPECT_GRADIENTS_MATCH([&](const Tensors& v) { return concat({fixed, v[0]}, 1); },
                         (Tensors{random_leaf({2, 2})}));
}

TEST(Shape, ExpandToANegativeSizeIsAnError) {
  EXPECT_THROW(expand(zeros({1, 3}), {-1, 3}), Error);
  EXPECT_THROW(expand(zeros({3}), {-2, 3}), Error);
}

TEST(Shape, SumToShapeChecksTheTarget) {
  EXPECT_THROW(sum_to_shape(zeros({3}), {2, 3}), Error);
  EXPECT_THROW(sum_to_shape(zeros({2, 3}), {2}), Error);
}

}  // namespace
}  // namespace remat
