// softmax, log_softmax and cross_entropy: hand cases (expected values worked
// out here from the definitions), large logits, axes, ignore_index, errors
// and gradients; cross_entropy's bits against the op it replaced (log_probs
// stored), and its gradient written over the logits only when they are its
// alone; the same bits at any thread count.
#include "ops/softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/autograd.h"
#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/gradcheck.h"
#include "tests/support/thread_counts.h"

namespace remat {
namespace {

using testing::contains;
using testing::error_of;
using testing::random_leaf;

void expect_near(const std::vector<double>& actual, const std::vector<double>& expected, double tol = 1e-12) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], tol) << "element " << i;
}

TEST(Softmax, HandComputedRows) {
  // Row [log 1, log 2, log 5]: softmax = (1, 2, 5) / 8. Row [0, 0, 0]: 1/3 each.
  const Tensor x = from_vector(std::vector<double>{0, std::log(2.0), std::log(5.0), 0, 0, 0}, {2, 3});
  const Tensor y = softmax(x);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  expect_near(y.to_vector<double>(), {1.0 / 8, 2.0 / 8, 5.0 / 8, 1.0 / 3, 1.0 / 3, 1.0 / 3});
  expect_near(log_softmax(x).to_vector<double>(),
              {std::log(1.0 / 8), std::log(2.0 / 8), std::log(5.0 / 8), -std::log(3.0), -std::log(3.0), -std::log(3.0)});
}

TEST(Softmax, RowsSumToOne) {
  const Tensor x = normal({4, 7}, 0.0, 3.0);
  const std::vector<float> y = softmax(x).to_vector<float>();
  for (int r = 0; r < 4; ++r) {
    float total = 0;
    for (int c = 0; c < 7; ++c) {
      const float v = y[static_cast<size_t>(r * 7 + c)];
      EXPECT_GT(v, 0.0f);
      total += v;
    }
    EXPECT_NEAR(total, 1.0f, 1e-6f) << "row " << r;
  }
}

TEST(Softmax, LargeLogitsDoNotOverflow) {
  // softmax is shift-invariant: [1000, 1001, 1002] behaves like [0, 1, 2].
  const Tensor x = from_vector(std::vector<float>{1000, 1001, 1002, -1000, -1000, 0}, {2, 3});
  const std::vector<float> y = softmax(x).to_vector<float>();
  const double z = 1 + std::exp(1.0) + std::exp(2.0);
  const std::vector<double> expected{1 / z, std::exp(1.0) / z, std::exp(2.0) / z, 0, 0, 1};
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_TRUE(std::isfinite(y[i])) << i;
    EXPECT_NEAR(y[i], expected[i], 1e-6) << i;
  }
  const std::vector<float> l = log_softmax(x).to_vector<float>();
  const std::vector<double> expected_log{-std::log(z), 1 - std::log(z), 2 - std::log(z), -1000, -1000, 0};
  for (size_t i = 0; i < l.size(); ++i) {
    EXPECT_TRUE(std::isfinite(l[i])) << i;
    EXPECT_NEAR(l[i], expected_log[i], 1e-6) << i;
  }
}

TEST(Softmax, OverAxis0AndMinus1) {
  // Columns [0, log 3] give (1/4, 3/4); column [0, 0] gives 1/2 each.
  const Tensor x = from_vector(std::vector<double>{0, 0, std::log(3.0), 0}, {2, 2});
  expect_near(softmax(x, 0).to_vector<double>(), {0.25, 0.5, 0.75, 0.5});
  expect_near(softmax(x, -1).to_vector<double>(), {0.5, 0.5, 0.75, 0.25});
  expect_near(softmax(x, 1).to_vector<double>(), softmax(x, -1).to_vector<double>());
  expect_near(log_softmax(x, 0).to_vector<double>(),
              {std::log(0.25), std::log(0.5), std::log(0.75), std::log(0.5)});
  // A middle axis of a 3-D tensor: every (i, :, k) sums to 1.
  const std::vector<double> y = softmax(normal({2, 3, 4}, 0, 1, DType::Float64), 1).to_vector<double>();
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 4; ++k) {
      double total = 0;
      for (int j = 0; j < 3; ++j) total += y[static_cast<size_t>(i * 12 + j * 4 + k)];
      EXPECT_NEAR(total, 1.0, 1e-12);
    }
  }
  EXPECT_THROW(softmax(x, 2), Error);
}

// Rows of 45 run the row maximum in lanes (two blocks of 16) and a tail of
// 13. A single 1000 among zeros is found wherever it sits: a missed maximum
// would give exp(1000) = inf and a NaN row. A NaN anywhere gives NaN.
TEST(Softmax, LongRowsFindTheirMaximumWherever) {
  const std::vector<int64_t> places{0, 5, 15, 16, 31, 32, 40, 44};
  const int64_t n = 45;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    std::vector<double> values(places.size() * n, 0.0);
    for (size_t r = 0; r < places.size(); ++r) values[r * n + static_cast<size_t>(places[r])] = 1000.0;
    const Tensor x = to_dtype(from_vector(values, {static_cast<int64_t>(places.size()), n}), dtype);
    const std::vector<double> y = to_dtype(softmax(x), DType::Float64).to_vector<double>();
    const std::vector<double> l = to_dtype(log_softmax(x), DType::Float64).to_vector<double>();
    for (size_t r = 0; r < places.size(); ++r) {
      for (int64_t c = 0; c < n; ++c) {
        const size_t i = r * n + static_cast<size_t>(c);
        EXPECT_EQ(y[i], c == places[r] ? 1.0 : 0.0) << dtype_name(dtype) << " row " << r << " column " << c;
        EXPECT_EQ(l[i], c == places[r] ? 0.0 : -1000.0) << dtype_name(dtype) << " row " << r << " column " << c;
      }
    }
    values.assign(n, 1.0);
    values[33] = NAN;
    for (double v : to_dtype(softmax(to_dtype(from_vector(values, {1, n}), dtype)), DType::Float64).to_vector<double>()) {
      EXPECT_TRUE(std::isnan(v)) << dtype_name(dtype);
    }
  }
}

TEST(Softmax, NonContiguousInput) {
  // x^T = [[0, log 3], [0, 0]]: rows give (1/4, 3/4) and (1/2, 1/2).
  const Tensor x = from_vector(std::vector<double>{0, 0, std::log(3.0), 0}, {2, 2});
  expect_near(softmax(transpose(x, 0, 1), -1).to_vector<double>(), {0.25, 0.75, 0.5, 0.5});
  expect_near(log_softmax(transpose(x, 0, 1), -1).to_vector<double>(),
              {std::log(0.25), std::log(0.75), std::log(0.5), std::log(0.5)});
}

TEST(Softmax, LargeInputMatchesRowByRow) {
  // 300 x 256 takes the threaded path; each row must equal the softmax of
  // that row alone (a 1 x 256 call runs serially).
  const Tensor x = normal({300, 256}, 0, 2, DType::Float64);
  const std::vector<double> all = softmax(x).to_vector<double>();
  const std::vector<double> all_log = log_softmax(x, 1).to_vector<double>();
  for (int64_t r : {0, 137, 299}) {
    const Tensor row = slice(x, 0, r, r + 1);
    const std::vector<double> one = softmax(row).to_vector<double>();
    const std::vector<double> one_log = log_softmax(row).to_vector<double>();
    for (size_t c = 0; c < 256; ++c) {
      ASSERT_EQ(all[static_cast<size_t>(r) * 256 + c], one[c]);
      ASSERT_EQ(all_log[static_cast<size_t>(r) * 256 + c], one_log[c]);
    }
  }
}

TEST(Softmax, LargeInputOverAxis0) {
  // Over axis 0 each column is normalised; the same as rows of the transpose.
  const Tensor x = normal({256, 300}, 0, 2, DType::Float64);
  const std::vector<double> by_column = softmax(x, 0).to_vector<double>();
  const std::vector<double> by_row = transpose(softmax(contiguous(transpose(x, 0, 1)), -1), 0, 1).to_vector<double>();
  ASSERT_EQ(by_column.size(), by_row.size());
  for (size_t i = 0; i < by_row.size(); ++i) ASSERT_NEAR(by_column[i], by_row[i], 1e-15) << i;
}

TEST(Softmax, Gradients) {
  const Tensors in{random_leaf({3, 5}, -2, 2)};
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return softmax(x[0]); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return softmax(x[0], 0); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return log_softmax(x[0]); }, in);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return log_softmax(x[0], 0); }, in);
  const Tensors in3{random_leaf({2, 3, 4}, -2, 2, 7)};
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return softmax(x[0], 1); }, in3);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return log_softmax(x[0], 1); }, in3);
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return softmax(transpose(x[0], 0, 2), -1); }, in3);
}

// Two rows, three classes:
//   row 0: logits (0, 0, 0),               target 1: -log(1/3) = log 3
//   row 1: logits (0, log 2, log 5) = log (1, 2, 5), target 2: -log(5/8)
Tensor two_rows() { return from_vector(std::vector<double>{0, 0, 0, 0, std::log(2.0), std::log(5.0)}, {2, 3}); }

TEST(CrossEntropy, HandComputed) {
  const Tensor targets = from_vector(std::vector<int64_t>{1, 2}, {2});
  Tensor logits = two_rows();
  logits.requires_grad_();
  const Tensor loss = cross_entropy(logits, targets);
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_NEAR(loss.item<double>(), (std::log(3.0) - std::log(5.0 / 8)) / 2, 1e-12);
  // dloss/dlogits[r] = (softmax(logits[r]) - onehot(t_r)) / 2
  loss.backward();
  expect_near(logits.grad().to_vector<double>(),
              {1.0 / 6, (1.0 / 3 - 1) / 2, 1.0 / 6, 1.0 / 16, 2.0 / 16, (5.0 / 8 - 1) / 2});
  // float32 gives the same loss.
  const Tensor loss32 = cross_entropy(to_dtype(two_rows(), DType::Float32), targets);
  EXPECT_NEAR(loss32.item<float>(), (std::log(3.0) - std::log(5.0 / 8)) / 2, 1e-6);
}

TEST(CrossEntropy, LargeInputGradientRows) {
  // 300 x 256 logits all zero: loss log 256; dx[r, c] = (1/256 - [c == t_r]) / 300.
  Tensor logits = zeros({300, 256}, DType::Float64);
  logits.requires_grad_();
  std::vector<int64_t> t(300);
  for (size_t r = 0; r < t.size(); ++r) t[r] = static_cast<int64_t>((r * 7) % 256);
  t[5] = -100;
  const Tensor loss = cross_entropy(logits, from_vector(t, {300}));
  EXPECT_NEAR(loss.item<double>(), std::log(256.0), 1e-12);
  loss.backward();
  const std::vector<double> g = logits.grad().to_vector<double>();
  for (size_t r = 0; r < 300; ++r) {
    for (size_t c = 0; c < 256; ++c) {
      const double expected = t[r] == -100 ? 0 : (1.0 / 256 - (static_cast<int64_t>(c) == t[r] ? 1 : 0)) / 299;
      ASSERT_NEAR(g[r * 256 + c], expected, 1e-15) << r << " " << c;
    }
  }
}

TEST(CrossEntropy, LargeLogits) {
  // Shift-invariant: (1000, 1000) with target 0 is log 2.
  const Tensor logits = from_vector(std::vector<float>{1000, 1000}, {1, 2});
  const Tensor loss = cross_entropy(logits, from_vector(std::vector<int64_t>{0}, {1}));
  EXPECT_NEAR(loss.item<float>(), std::log(2.0), 1e-6);
}

TEST(CrossEntropy, IgnoredRowsDoNotCount) {
  // Rows 0 and 2 as in two_rows(); row 1 is ignored whatever its logits.
  Tensor logits = from_vector(std::vector<double>{0, 0, 0, 9, -3, 4, 0, std::log(2.0), std::log(5.0)}, {3, 3});
  logits.requires_grad_();
  const Tensor targets = from_vector(std::vector<int64_t>{1, -100, 2}, {3});
  const Tensor loss = cross_entropy(logits, targets);
  EXPECT_NEAR(loss.item<double>(), (std::log(3.0) - std::log(5.0 / 8)) / 2, 1e-12);
  loss.backward();
  expect_near(logits.grad().to_vector<double>(),
              {1.0 / 6, (1.0 / 3 - 1) / 2, 1.0 / 6, 0, 0, 0, 1.0 / 16, 2.0 / 16, (5.0 / 8 - 1) / 2});

  // Another ignore_index: class 1 rows are skipped.
  const Tensor t2 = from_vector(std::vector<int64_t>{1, 0, 2}, {3});
  // Rows 1 and 2: row 1 = (9, -3, 4), target 0: log(e^9 + e^-3 + e^4) - 9.
  const double row1 = std::log(std::exp(9.0) + std::exp(-3.0) + std::exp(4.0)) - 9;
  EXPECT_NEAR(cross_entropy(logits.detach(), t2, 1).item<double>(), (row1 - std::log(5.0 / 8)) / 2, 1e-12);

  // Every row ignored: NaN, as in PyTorch.
  const Tensor all_ignored = from_vector(std::vector<int64_t>{-100, -100, -100}, {3});
  EXPECT_TRUE(std::isnan(cross_entropy(logits.detach(), all_ignored).item<double>()));
}

TEST(CrossEntropy, TargetOutOfRangeNamesTargetAndRow) {
  const std::string message =
      error_of([] { cross_entropy(two_rows(), from_vector(std::vector<int64_t>{0, 7}, {2})); });
  EXPECT_TRUE(contains(message, "target 7")) << message;
  EXPECT_TRUE(contains(message, "row 1")) << message;
  const std::string negative =
      error_of([] { cross_entropy(two_rows(), from_vector(std::vector<int64_t>{-1, 0}, {2})); });
  EXPECT_TRUE(contains(negative, "target -1")) << negative;
  EXPECT_TRUE(contains(negative, "row 0")) << negative;
  EXPECT_THROW(cross_entropy(two_rows(), from_vector(std::vector<int64_t>{3, 0}, {2})), Error);
}

TEST(CrossEntropy, TargetsShapeMismatch) {
  const std::string message =
      error_of([] { cross_entropy(two_rows(), from_vector(std::vector<int64_t>{0, 1, 2}, {3})); });
  EXPECT_TRUE(contains(message, "(3)")) << message;
  EXPECT_TRUE(contains(message, "(2, 3)")) << message;
  EXPECT_THROW(cross_entropy(two_rows(), from_vector(std::vector<int64_t>{0, 1}, {2, 1})), Error);
  EXPECT_THROW(cross_entropy(two_rows(), from_vector(std::vector<double>{0, 1}, {2})), Error);
  EXPECT_THROW(cross_entropy(from_vector(std::vector<double>{0, 1}, {2}), from_vector(std::vector<int64_t>{0}, {1})),
               Error);
}

TEST(CrossEntropy, Gradients) {
  const Tensor targets = from_vector(std::vector<int64_t>{4, 0, 2, 2}, {4});
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return cross_entropy(x[0], x[1]); },
                         (Tensors{random_leaf({4, 5}, -2, 2), targets}));
  const Tensor with_ignored = from_vector(std::vector<int64_t>{4, -100, 2, 1}, {4});
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return cross_entropy(x[0], x[1]); },
                         (Tensors{random_leaf({4, 5}, -2, 2, 3), with_ignored}));
  // Through a transposed view of the logits and a scale of the loss.
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return mul(cross_entropy(transpose(x[0], 0, 1), x[1]), 3.0); },
                         (Tensors{random_leaf({5, 4}, -2, 2, 5), targets}));
}

TEST(CrossEntropy, LeadingAxesAreFlattened) {
  // (2, 3, 5) logits with (2, 3) targets are the (6, 5) problem, loss and gradient.
  const Tensor values = normal({2, 3, 5}, 0, 2, DType::Float64);
  const std::vector<int64_t> t{4, 0, -100, 2, 2, 1};
  Tensor logits3 = contiguous_copy(values);
  logits3.requires_grad_();
  Tensor logits2 = contiguous_copy(view(values, {6, 5}));
  logits2.requires_grad_();
  const Tensor loss3 = cross_entropy(logits3, from_vector(t, {2, 3}));
  const Tensor loss2 = cross_entropy(logits2, from_vector(t, {6}));
  EXPECT_EQ(loss3.dim(), 0);
  EXPECT_EQ(loss3.item<double>(), loss2.item<double>());
  loss3.backward();
  loss2.backward();
  EXPECT_EQ(logits3.grad().shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(logits3.grad().to_vector<double>(), logits2.grad().to_vector<double>());

  // Contiguous logits are flattened by views: the call's peak is the (6, 2)
  // row statistics and the scalar loss, no copy of the logits and no (6, 5)
  // log-probabilities (Note [Cross-entropy without log_probs]).
  {
    const Tensor targets = from_vector(t, {2, 3});
    const int64_t before = cpu_allocator().stats().live_of(MemoryCategory::Activation);
    ScopedPeak peak;
    const Tensor loss = cross_entropy(logits3, targets);
    EXPECT_EQ(peak.stats().peak_of(MemoryCategory::Activation) - before, 6 * 2 * 8 + 8);
  }

  // Hand case (1, 2, 3): the two rows of two_rows() with targets 1 and 2.
  const Tensor hand = view(two_rows(), {1, 2, 3});
  EXPECT_NEAR(cross_entropy(hand, from_vector(std::vector<int64_t>{1, 2}, {1, 2})).item<double>(),
              (std::log(3.0) - std::log(5.0 / 8)) / 2, 1e-12);
}

TEST(CrossEntropy, LeadingAxesGradients) {
  const Tensor targets = from_vector(std::vector<int64_t>{4, 0, 2, 2, -100, 1}, {2, 3});
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return cross_entropy(x[0], x[1]); },
                         (Tensors{random_leaf({2, 3, 5}, -2, 2, 9), targets}));
  // 4-D logits (2, 1, 3, 4) with (2, 1, 3) targets.
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return cross_entropy(x[0], x[1]); },
                         (Tensors{random_leaf({2, 1, 3, 4}, -2, 2, 10),
                                  from_vector(std::vector<int64_t>{3, 0, 1, 2, 2, 0}, {2, 1, 3})}));
  // A non-contiguous (2, 3, 5) view of (5, 3, 2) logits: reshape copies, the gradient still flows.
  EXPECT_GRADIENTS_MATCH([](const Tensors& x) { return cross_entropy(transpose(x[0], 0, 2), x[1]); },
                         (Tensors{random_leaf({5, 3, 2}, -2, 2, 11), targets}));
}

TEST(CrossEntropy, LeadingAxesMismatch) {
  const std::string message = error_of([] {
    cross_entropy(zeros({2, 3, 5}, DType::Float64), from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 0}, {3, 2}));
  });
  EXPECT_TRUE(contains(message, "(3, 2)")) << message;
  EXPECT_TRUE(contains(message, "(2, 3, 5)")) << message;
  EXPECT_THROW(cross_entropy(zeros({2, 3, 5}), from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 0}, {6})), Error);
  EXPECT_THROW(cross_entropy(zeros({2, 3, 5}), zeros({2, 3})), Error);
  // Target out of range is still reported (as a row of the flattened logits).
  const std::string range = error_of(
      [] { cross_entropy(zeros({2, 2, 3}), from_vector(std::vector<int64_t>{0, 1, 2, 3}, {2, 2})); });
  EXPECT_TRUE(contains(range, "target 3")) << range;
  EXPECT_TRUE(contains(range, "row 3")) << range;
}

TEST(CrossEntropy, FusedMatchesTheUnfusedReference) {
  // Values and gradients of the fused op against log_softmax + one-hot + sum,
  // with one ignored row, in float64.
  const Tensor a = testing::random_leaf({6, 5}, -3, 3, 21);
  const Tensor b = testing::random_leaf({6, 5}, -3, 3, 21);
  const Tensor targets = from_vector(std::vector<int64_t>{0, 4, -100, 2, 2, 1}, {6});
  const Tensor fused = cross_entropy(a, targets);
  const Tensor reference = cross_entropy_reference(b, targets);
  EXPECT_NEAR(fused.item<double>(), reference.item<double>(), 1e-14);
  fused.backward();
  reference.backward();
  const std::vector<double> ga = a.grad().to_vector<double>(), gb = b.grad().to_vector<double>();
  for (size_t i = 0; i < ga.size(); ++i) EXPECT_NEAR(ga[i], gb[i], 1e-14) << i;
  for (size_t c = 10; c < 15; ++c) EXPECT_EQ(ga[c], 0.0);  // the ignored row
}

template <class T>
void expect_same_bits(const std::vector<T>& actual, const std::vector<T>& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::memcmp(&actual[i], &expected[i], sizeof(T)) != 0 && wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0u) << what << ": first at element " << first << ", " << actual[first] << " against "
                       << expected[first];
}

// rows x classes logits in [-8, 8), every fifth row ignored, held to the
// two-buffer op cross_entropy was before Note [Cross-entropy without
// log_probs]: log_probs = log_softmax(logits) (its kernel), the loss
// -sum log_probs[r, t_r] in double over the counted rows, divided by their
// number and rounded to T, and dlogits = scale * exp(log_probs) (the exp
// kernel), less scale at the target, 0 on ignored rows. Bit for bit.
template <class T>
void expect_bits_of_the_two_buffer_op(int64_t rows, int64_t classes, uint64_t seed) {
  const std::string where = std::string(sizeof(T) == 4 ? "float32 " : "float64 ") + std::to_string(rows) + " x " +
                            std::to_string(classes);
  const DType dtype = sizeof(T) == 4 ? DType::Float32 : DType::Float64;
  const Tensor x = to_dtype(testing::random_leaf({rows, classes}, -8, 8, seed).detach(), dtype).requires_grad_();
  std::vector<int64_t> t(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) t[static_cast<size_t>(r)] = r % 5 == 3 ? -100 : (r * 7919 + 13) % classes;
  const Tensor loss = cross_entropy(x, from_vector(t, {rows}));
  loss.backward();

  const Tensor log_probs = log_softmax(x.detach(), -1);
  const std::vector<T> lp = log_probs.to_vector<T>(), e = exp(log_probs).to_vector<T>();
  double total = 0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (t[static_cast<size_t>(r)] == -100) continue;
    total -= static_cast<double>(lp[static_cast<size_t>(r * classes + t[static_cast<size_t>(r)])]);
    ++count;
  }
  ASSERT_GT(count, 0);
  expect_same_bits(loss.to_vector<T>(), {static_cast<T>(total / static_cast<double>(count))}, "loss " + where);
  const T scale = T(1) / static_cast<T>(count);
  std::vector<T> d(e.size());
  for (size_t i = 0; i < e.size(); ++i) d[i] = scale * e[i];
  for (int64_t r = 0; r < rows; ++r) {
    T* row = d.data() + r * classes;
    if (t[static_cast<size_t>(r)] == -100) {
      std::fill(row, row + classes, T(0));
    } else {
      row[t[static_cast<size_t>(r)]] -= scale;
    }
  }
  expect_same_bits(x.grad().to_vector<T>(), d, "dlogits " + where);
}

TEST(CrossEntropy, BitsOfTheOpThatStoredLogProbs) {
  for (const auto& [rows, classes] : std::vector<std::pair<int64_t, int64_t>>{{37, 50}, {9, 1024}, {6, 1500},
                                                                              {3, 50304}, {1, 1}}) {
    expect_bits_of_the_two_buffer_op<float>(rows, classes, static_cast<uint64_t>(rows * 31 + classes));
    expect_bits_of_the_two_buffer_op<double>(rows, classes, static_cast<uint64_t>(rows * 37 + classes));
  }
}

// The identity into a fresh storage that only the graph holds; its backward
// notes where the gradient it is given lives.
class Probe final : public Node {
 public:
  explicit Probe(const void** seen) : seen_(seen) {}
  std::string_view name() const override { return "probe"; }
  Tensor forward(const Tensors& in) override { return contiguous_copy(in[0]); }
  Tensors backward(const Tensor& grad) override {
    *seen_ = grad.raw_data();
    return {grad};
  }

 private:
  const void** seen_;
};

struct InPlaceCase {
  bool keep_logits = false;  // the caller holds the logits through backward
  bool two_readers = false;  // a second cross_entropy saves the same logits
  bool retain_graph = false;  // a first backward keeps the graph, a second runs
};

struct InPlaceResult {
  std::vector<float> grad;
  bool in_place = false;  // the probe was given the logits' own storage
  bool logits_kept = true;  // a kept handle still reads the logits' values
};

InPlaceResult run_in_place_case(const InPlaceCase& c) {
  const int64_t rows = 6, classes = 1100;
  const Tensor x = to_dtype(testing::random_leaf({rows, classes}, -5, 5, 61).detach(), DType::Float32).requires_grad_();
  std::vector<int64_t> t = {3, -100, 1099, 0, 512, 7};
  const Tensor targets = from_vector(t, {rows});
  const void* seen = nullptr;
  Tensor logits = apply_op(std::make_shared<Probe>(&seen), {x});
  const void* storage = logits.raw_data();
  Tensor loss = cross_entropy(logits, targets);
  if (c.two_readers) loss = add(loss, cross_entropy(logits, targets));
  Tensor kept = c.keep_logits ? logits : Tensor();
  logits = Tensor();
  InPlaceResult result;
  if (c.retain_graph) {
    loss.backward({}, true);
    result.in_place = seen == storage;
  }
  loss.backward();
  if (!c.retain_graph) result.in_place = seen == storage;
  result.grad = x.grad().to_vector<float>();
  if (kept.defined()) result.logits_kept = kept.to_vector<float>() == x.detach().to_vector<float>();
  return result;
}

TEST(CrossEntropy, GradientOverTheLogitsOnlyWhenItHoldsThemAlone) {
  const InPlaceResult alone = run_in_place_case({});
  EXPECT_TRUE(alone.in_place) << "the logits were the op's alone: dlogits should have been written over them";
  const InPlaceResult kept = run_in_place_case({.keep_logits = true});
  EXPECT_FALSE(kept.in_place) << "the caller holds the logits";
  EXPECT_TRUE(kept.logits_kept) << "backward wrote over logits the caller still holds";
  expect_same_bits(alone.grad, kept.grad, "in place against a new buffer");

  // Two readers of the same logits: the later one's backward runs while the
  // earlier still saves them. Each gradient is the one above, their sum twice it.
  std::vector<float> twice = kept.grad;
  for (float& g : twice) g += g;
  const InPlaceResult two = run_in_place_case({.two_readers = true});
  expect_same_bits(two.grad, twice, "two readers");
  const InPlaceResult two_kept = run_in_place_case({.keep_logits = true, .two_readers = true});
  EXPECT_TRUE(two_kept.logits_kept);
  expect_same_bits(two_kept.grad, twice, "two readers, logits kept");

  // A retained graph keeps its saved logits for the second backward: the
  // first must not write over them; the second may. x.grad sums both.
  const InPlaceResult retained = run_in_place_case({.retain_graph = true});
  EXPECT_FALSE(retained.in_place) << "the first backward retained the graph";
  expect_same_bits(retained.grad, twice, "retained graph, two backwards");
}

TEST(Softmax, EmptyAxisIsAnError) {
  EXPECT_THROW(softmax(zeros({3, 0})), Error);
  EXPECT_THROW(log_softmax(zeros({0, 2}), 0), Error);
  EXPECT_THROW(cross_entropy(zeros({2, 0}), zeros({2}, DType::Int64)), Error);
}

// softmax, log_softmax and cross_entropy, values and gradients, at 1, 2 and
// 3 threads bit for bit: (256, 512) over the last axis and (16, 64, 96)
// over the middle one (strided rows), above the 65536 elements where rows
// split; cross_entropy with some targets ignored.
TEST(Softmax, BitsDoNotDependOnTheThreadCount) {
  using Fn = Tensor (*)(const Tensor&, int64_t);
  const std::pair<const char*, Fn> fns[] = {{"softmax", &softmax}, {"log_softmax", &log_softmax}};
  std::vector<int64_t> targets(256);
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = i % 7 == 3 ? -100 : static_cast<int64_t>(i * 37 % 512);
  const Tensor t = from_vector(targets, {256});
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    Generator g(63);
    const Tensor x = uniform({256, 512}, -8, 8, dtype, g), dy = uniform({256, 512}, -1, 1, dtype, g);
    const Tensor x3 = uniform({16, 64, 96}, -8, 8, dtype, g), dy3 = uniform({16, 64, 96}, -1, 1, dtype, g);
    for (const auto& [name, op] : fns) {
      const auto& fn = op;  // a lambda may not capture a structured binding (clang 14)
      for (const int64_t axis : {-1, 1}) {
        const Tensor& in = axis == -1 ? x : x3;
        const Tensor& grad = axis == -1 ? dy : dy3;
        testing::expect_bits_independent_of_threads(
            std::string(name) + " axis " + std::to_string(axis) + " " + std::string(dtype_name(dtype)), [&] {
              Tensor leaf = in.detach().requires_grad_();
              const Tensor y = fn(leaf, axis);
              sum(y * grad).backward();
              return Tensors{y, leaf.grad()};
            });
      }
    }
    testing::expect_bits_independent_of_threads("cross_entropy " + std::string(dtype_name(dtype)), [&] {
      Tensor leaf = x.detach().requires_grad_();
      const Tensor loss = cross_entropy(leaf, t);
      loss.backward();
      return Tensors{loss, leaf.grad()};
    });
  }
}

}  // namespace
}  // namespace remat
