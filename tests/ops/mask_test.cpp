// masked_fill and causal_mask: a hand case, a (T, T) mask broadcast over
// (B, H, T, T) scores, the causal softmax, gradients and shape errors.
#include "ops/mask.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
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

using testing::kInf;

TEST(CausalMask, OnesAboveTheDiagonal) {
  const Tensor m = causal_mask(3);
  EXPECT_EQ(m.dtype(), DType::Int64);
  EXPECT_EQ(m.shape(), (Shape{3, 3}));
  EXPECT_EQ(m.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(causal_mask(1).to_vector<int64_t>(), (std::vector<int64_t>{0}));
  EXPECT_EQ(causal_mask(0).numel(), 0);
  EXPECT_THROW(causal_mask(-1), Error);
}

TEST(MaskedFill, HandComputed) {
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  x.requires_grad_();
  // Any nonzero mask entry fills (here 1 and -2).
  const Tensor mask = from_vector(std::vector<int64_t>{0, 1, 0, -2, 0, 0}, {2, 3});
  const Tensor out = masked_fill(x, mask, -7.5);
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{1, -7.5, 3, -7.5, 5, 6}));
  out.backward(from_vector(std::vector<double>{10, 20, 30, 40, 50, 60}, {2, 3}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{10, 0, 30, 0, 50, 60}));

  // A float mask of x's dtype, broadcast from a row: columns 0 and 2 filled.
  const Tensor row = from_vector(std::vector<double>{0.5, 0, -1}, {3});
  EXPECT_EQ(masked_fill(x.detach(), row, 0).to_vector<double>(), (std::vector<double>{0, 2, 0, 0, 5, 0}));
  // float32, -infinity.
  const Tensor x32 = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  const std::vector<float> y32 = masked_fill(x32, causal_mask(2), -kInf).to_vector<float>();
  EXPECT_EQ(y32[0], 1.0f);
  EXPECT_EQ(y32[1], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(y32[2], 3.0f);
  EXPECT_EQ(y32[3], 4.0f);
}

TEST(MaskedFill, BroadcastsOverBatchAndHeads) {
  // scores (2, 3, 4, 4) with value 1000 b + 100 h + 4 row + col; causal mask (4, 4).
  const int64_t B = 2, H = 3, T = 4;
  std::vector<double> v;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < T * T; ++i) v.push_back(static_cast<double>(b * 1000 + h * 100 + i));
    }
  }
  Tensor scores = from_vector(v, {B, H, T, T});
  scores.requires_grad_();
  const Tensor out = masked_fill(scores, causal_mask(T), -1e9);
  EXPECT_EQ(out.shape(), (Shape{B, H, T, T}));
  const std::vector<double> y = out.to_vector<double>();
  for (size_t k = 0; k < y.size(); ++k) {
    const int64_t row = static_cast<int64_t>(k) % (T * T) / T, col = static_cast<int64_t>(k) % T;
    EXPECT_EQ(y[k], col > row ? -1e9 : v[k]) << k;
  }
  sum(out).backward();
  const std::vector<double> g = scores.grad().to_vector<double>();
  for (size_t k = 0; k < g.size(); ++k) {
    const int64_t row = static_cast<int64_t>(k) % (T * T) / T, col = static_cast<int64_t>(k) % T;
    EXPECT_EQ(g[k], col > row ? 0.0 : 1.0) << k;
  }
  // A (3, 1, 1) per-head mask: head 1 entirely filled.
  const Tensor heads = from_vector(std::vector<int64_t>{0, 1, 0}, {3, 1, 1});
  const std::vector<double> z = masked_fill(scores.detach(), heads, 0).to_vector<double>();
  for (size_t k = 0; k < z.size(); ++k) EXPECT_EQ(z[k], (k / 16) % 3 == 1 ? 0.0 : v[k]) << k;
}

TEST(MaskedFill, CausalSoftmaxRows) {
  // -inf above the diagonal, then softmax: zeros there, and each row sums
  // to 1 over the allowed columns. Row 1 of all-zero scores is (1/2, 1/2, 0, 0).
  const Tensor scores = normal({2, 3, 4, 4}, 0, 1, DType::Float64);
  const std::vector<double> p = softmax(masked_fill(scores, causal_mask(4), -kInf)).to_vector<double>();
  for (size_t r = 0; r < p.size() / 4; ++r) {
    const size_t row = r % 4;
    double total = 0;
    for (size_t c = 0; c < 4; ++c) {
      const double value = p[r * 4 + c];
      if (c > row) EXPECT_EQ(value, 0.0) << r << " " << c;
      else EXPECT_GT(value, 0.0) << r << " " << c;
      total += value;
    }
    EXPECT_NEAR(total, 1.0, 1e-12) << r;
  }
  const std::vector<double> uniform_rows =
      softmax(masked_fill(zeros({4, 4}, DType::Float64), causal_mask(4), -kInf)).to_vector<double>();
  EXPECT_EQ(std::vector<double>(uniform_rows.begin() + 4, uniform_rows.begin() + 8),
            (std::vector<double>{0.5, 0.5, 0, 0}));
}

TEST(MaskedFill, SavesOnlyTheMask) {
  // Backward needs the mask, not the scores: after forward the activation
  // bytes grow by the output (the (4, 4) int64 mask was made before).
  const Tensor mask = causal_mask(64);
  Tensor scores = normal({8, 4, 64, 64});
  scores.requires_grad_();
  const int64_t before = cpu_allocator().stats().live_of(MemoryCategory::Activation);
  const Tensor out = masked_fill(scores, mask, -kInf);
  EXPECT_EQ(cpu_allocator().stats().live_of(MemoryCategory::Activation) - before,
            static_cast<int64_t>(out.nbytes()));
}

TEST(MaskedFill, Gradients) {
  const Tensor mask = from_vector(std::vector<int64_t>{1, 0, 0, 1, 1, 0}, {2, 3});
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return masked_fill(x[0], x[1], 3.0); },
                         (Tensors{random_leaf({2, 3}), mask}));
  // Broadcast mask and a transposed (non-contiguous) input.
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return masked_fill(transpose(x[0], 1, 2), x[1], -2.0); },
                         (Tensors{random_leaf({2, 3, 3}, -1, 1, 4), causal_mask(3)}));
}

TEST(MaskedFill, ShapeMismatchNamesBothShapes) {
  const std::string message = error_of([] { masked_fill(zeros({2, 4, 4}), causal_mask(3), 0); });
  EXPECT_TRUE(contains(message, "(3, 3)")) << message;
  EXPECT_TRUE(contains(message, "(2, 4, 4)")) << message;
  // A mask with more axes than x does not broadcast to x either.
  EXPECT_THROW(masked_fill(zeros({4}), zeros({2, 4}, DType::Int64), 0), Error);
  // A float mask must have x's dtype.
  const std::string dtype = error_of([] { masked_fill(zeros({2}, DType::Float64), zeros({2}), 0); });
  EXPECT_TRUE(contains(dtype, "float32")) << dtype;
  EXPECT_TRUE(contains(dtype, "float64")) << dtype;
}

}  // namespace
}  // namespace remat
