// embedding: a hand case with repeated ids (rows gathered; gradient rows
// summed into the table), ids of several shapes, gradients, the same bits
// at any thread count, and errors.
#include "ops/embedding.h"

#include <gtest/gtest.h>

#include <string>

#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/gradcheck.h"
#include "tests/support/thread_counts.h"

namespace remat {
namespace {

using testing::contains;
using testing::error_of;
using testing::random_leaf;

// weight (4, 2): row v is (10 v, 10 v + 1).
Tensor table() { return from_vector(std::vector<double>{0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}); }

TEST(Embedding, HandComputedWithRepeatedIds) {
  Tensor weight = table();
  weight.requires_grad_();
  // ids (2, 3) = [[2, 0, 2], [3, 2, 0]]: id 2 three times, id 0 twice, id 1 never.
  const Tensor ids = from_vector(std::vector<int64_t>{2, 0, 2, 3, 2, 0}, {2, 3});
  const Tensor out = embedding(weight, ids);
  EXPECT_EQ(out.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{20, 21, 0, 1, 20, 21, 30, 31, 20, 21, 0, 1}));

  // dout[i] = (i, 100 i) for the six rows i = 0..5:
  //   dweight[0] = dout[1] + dout[5] = (6, 600)
  //   dweight[1] = 0
  //   dweight[2] = dout[0] + dout[2] + dout[4] = (6, 600)
  //   dweight[3] = dout[3] = (3, 300)
  const Tensor dout = from_vector(std::vector<double>{0, 0, 1, 100, 2, 200, 3, 300, 4, 400, 5, 500}, {2, 3, 2});
  out.backward(dout);
  EXPECT_EQ(weight.grad().shape(), (Shape{4, 2}));
  EXPECT_EQ(weight.grad().to_vector<double>(), (std::vector<double>{6, 600, 0, 0, 6, 600, 3, 300}));
}

TEST(Embedding, IdsOfAnyShape) {
  // Scalar ids give (C); 1-D ids give (n, C); float32 tables work too.
  const Tensor scalar = embedding(table(), from_vector(std::vector<int64_t>{3}, {}));
  EXPECT_EQ(scalar.shape(), (Shape{2}));
  EXPECT_EQ(scalar.to_vector<double>(), (std::vector<double>{30, 31}));
  const Tensor flat = embedding(to_dtype(table(), DType::Float32), from_vector(std::vector<int64_t>{1, 1}, {2}));
  EXPECT_EQ(flat.shape(), (Shape{2, 2}));
  EXPECT_EQ(flat.to_vector<float>(), (std::vector<float>{10, 11, 10, 11}));
  // A transposed (non-contiguous) id tensor is read in its logical order.
  const Tensor ids = transpose(from_vector(std::vector<int64_t>{0, 1, 2, 3}, {2, 2}), 0, 1);  // [[0, 2], [1, 3]]
  EXPECT_EQ(embedding(table(), ids).to_vector<double>(),
            (std::vector<double>{0, 1, 20, 21, 10, 11, 30, 31}));
}

TEST(Embedding, LargeBackwardMatchesCounts) {
  // 50000 ids over V = 7 rows of C = 300 channels (threaded paths), dout = 1:
  // dweight[v, c] is the number of times v occurs.
  const int64_t n = 50000, vocab = 7, channels = 300;
  std::vector<int64_t> ids(static_cast<size_t>(n));
  std::vector<double> counts(static_cast<size_t>(vocab), 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int64_t>((i * i + 3 * i) % vocab);
    counts[static_cast<size_t>(ids[i])] += 1;
  }
  Tensor weight = zeros({vocab, channels}, DType::Float64);
  weight.requires_grad_();
  sum(embedding(weight, from_vector(ids, {n}))).backward();
  const std::vector<double> g = weight.grad().to_vector<double>();
  for (size_t v = 0; v < static_cast<size_t>(vocab); ++v) {
    for (size_t c = 0; c < static_cast<size_t>(channels); ++c) {
      ASSERT_EQ(g[v * static_cast<size_t>(channels) + c], counts[v]) << v << " " << c;
    }
  }
}

TEST(Embedding, Gradients) {
  const Tensor ids = from_vector(std::vector<int64_t>{1, 4, 1, 0, 4, 4}, {3, 2});
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return embedding(x[0], x[1]); }, (Tensors{random_leaf({5, 3}), ids}));
  // Through a transposed table (non-contiguous weight).
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return embedding(transpose(x[0], 0, 1), x[1]); },
                         (Tensors{random_leaf({3, 5}, -1, 1, 2), ids}));
}

TEST(Embedding, IdOutOfRangeNamesIdPositionAndVocab) {
  const std::string message =
      error_of([] { embedding(table(), from_vector(std::vector<int64_t>{0, 1, 2, 3, 9, 1}, {2, 3})); });
  EXPECT_TRUE(contains(message, "id 9")) << message;
  EXPECT_TRUE(contains(message, "position (1, 1)")) << message;
  EXPECT_TRUE(contains(message, "V = 4")) << message;
  const std::string negative = error_of([] { embedding(table(), from_vector(std::vector<int64_t>{-1}, {1})); });
  EXPECT_TRUE(contains(negative, "id -1")) << negative;
  EXPECT_TRUE(contains(negative, "position (0)")) << negative;
  EXPECT_THROW(embedding(table(), from_vector(std::vector<int64_t>{4}, {1})), Error);
}

// Backward reads the ids again, and they may have changed since forward
// checked them without an op seeing it (bytes a tensor borrows, such as a
// NumPy array that Python writes, carry no version): an id outside the table
// is an error naming it, never a write outside the gradient.
TEST(Embedding, BackwardNamesAnIdThatLeftTheTableAfterForward) {
  for (const int64_t bad : {int64_t{4}, int64_t{-1}, int64_t{1} << 40}) {
    SCOPED_TRACE("id " + std::to_string(bad));
    Tensor weight = table();
    weight.requires_grad_();
    const Tensor ids = from_vector(std::vector<int64_t>{2, 0, 2, 3, 2, 0}, {2, 3});
    const Tensor out = embedding(weight, ids);
    ids.data<int64_t>()[4] = bad;  // written behind the engine's back: no version bump
    const std::string message = error_of([&] { sum(out).backward(); });
    EXPECT_TRUE(contains(message, "embedding backward")) << message;
    EXPECT_TRUE(contains(message, "id " + std::to_string(bad))) << message;
    EXPECT_TRUE(contains(message, "position (1, 1)")) << message;
    EXPECT_TRUE(contains(message, "V = 4")) << message;
  }
}

TEST(Embedding, BadDtypeOrShape) {
  const std::string float_ids = error_of([] { embedding(table(), from_vector(std::vector<double>{0, 1}, {2})); });
  EXPECT_TRUE(contains(float_ids, "int64")) << float_ids;
  EXPECT_TRUE(contains(float_ids, "float64")) << float_ids;
  const std::string three_d = error_of([] { embedding(zeros({2, 3, 4}), from_vector(std::vector<int64_t>{0}, {1})); });
  EXPECT_TRUE(contains(three_d, "(V, C)")) << three_d;
  EXPECT_TRUE(contains(three_d, "(2, 3, 4)")) << three_d;
  EXPECT_THROW(embedding(zeros({4}), from_vector(std::vector<int64_t>{0}, {1})), Error);
}

// The rows and the table's gradient at 1, 2 and 3 threads bit for bit:
// 1024 ids of (1000, 192), many of them repeated (300 distinct), so that
// gradient rows collide; threads split the channels.
TEST(Embedding, BitsDoNotDependOnTheThreadCount) {
  std::vector<int64_t> ids(1024);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 7919 % 300);
  const Tensor t = from_vector(ids, {8, 128});
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    Generator g(64);
    const Tensor w = uniform({1000, 192}, -1, 1, dtype, g), dy = uniform({8, 128, 192}, -1, 1, dtype, g);
    testing::expect_bits_independent_of_threads("embedding " + std::string(dtype_name(dtype)), [&] {
      Tensor leaf = w.detach().requires_grad_();
      const Tensor y = embedding(leaf, t);
      sum(y * dy).backward();
      return Tensors{y, leaf.grad()};
    });
  }
}

}  // namespace
}  // namespace remat
