// matmul and linear: hand cases, gradients, transposed views, errors.
#include "ops/matmul.h"

#include <gtest/gtest.h>

#include "ops/ops.h"
#include "tests/support/gradcheck.h"

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

TEST(Linear, NoInputFeaturesGivesTheBias) {
  const Tensor b = from_vector(std::vector<float>{1, 2}, {2});
  EXPECT_EQ(linear(zeros({3, 0}), zeros({2, 0}), b).to_vector<float>(), (std::vector<float>{1, 2, 1, 2, 1, 2}));
}

}  // namespace
}  // namespace remat
