// Metrics against hand-computed cases (train/metrics.h).
#include "train/metrics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/factory.h"
#include "tests/support/errors.h"

namespace remat::train {
namespace {

using testing::contains;
using testing::error_of;

// Labels    0 0 0 1 1 2
// Predicted 0 0 1 1 2 2
// Confusion (rows label, columns predicted): [[2,1,0],[0,1,1],[0,0,1]].
// Class 0: TP 2, FP 0, FN 1 -> P 1, R 2/3, F1 0.8
// Class 1: TP 1, FP 1, FN 1 -> P 1/2, R 1/2, F1 1/2
// Class 2: TP 1, FP 1, FN 0 -> P 1/2, R 1, F1 2/3
const std::vector<int64_t> kLabels{0, 0, 0, 1, 1, 2};
const std::vector<int64_t> kPredicted{0, 0, 1, 1, 2, 2};

TEST(Metrics, MacroScoresMatchAHandComputedConfusionMatrix) {
  const ClassScores s = macro_scores(kPredicted, kLabels);
  EXPECT_DOUBLE_EQ(s.precision, (1.0 + 0.5 + 0.5) / 3);
  EXPECT_DOUBLE_EQ(s.recall, (2.0 / 3 + 0.5 + 1.0) / 3);
  EXPECT_DOUBLE_EQ(s.f1, (0.8 + 0.5 + 2.0 / 3) / 3);
  EXPECT_DOUBLE_EQ(accuracy(kPredicted, kLabels), 4.0 / 6);
}

TEST(Metrics, AClassOnlyPredictedCountsWithZeroRecallAndPrecision) {
  // Class 3 never occurs in the labels but is predicted once: P 0 (0 of 1), R 0 (0/0), F1 0.
  const ClassScores s = macro_scores({0, 3}, {0, 0});
  EXPECT_DOUBLE_EQ(s.precision, (1.0 + 0.0) / 2);
  EXPECT_DOUBLE_EQ(s.recall, (0.5 + 0.0) / 2);
  EXPECT_DOUBLE_EQ(s.f1, (2 * 1.0 * 0.5 / 1.5 + 0.0) / 2);
}

TEST(Metrics, ClassificationMetricsTakeTheArgmaxOfScores) {
  std::vector<float> scores;
  for (int64_t p : kPredicted) {
    for (int64_t c = 0; c < 3; ++c) scores.push_back(c == p ? 2.0f : -1.0f);
  }
  const Metrics m = classification_metrics({.predictions = from_vector(scores, {6, 3}),
                                            .label_ids = from_vector(kLabels, {6})});
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].first, "accuracy");
  EXPECT_DOUBLE_EQ(m[0].second, 4.0 / 6);
  EXPECT_EQ(m[1].first, "f1");
  EXPECT_DOUBLE_EQ(m[1].second, (0.8 + 0.5 + 2.0 / 3) / 3);
  const Metrics by_id = classification_metrics({.predictions = from_vector(kPredicted, {6}),
                                                .label_ids = from_vector(kLabels, {6})});
  EXPECT_EQ(by_id, m);
}

TEST(Metrics, PerplexityIsTheExponentialOfTheMeanLoss) {
  EXPECT_DOUBLE_EQ(perplexity(std::log(50.0)), 50.0);
  EXPECT_TRUE(contains(error_of([] { perplexity(NAN); }), "the mean loss is nan"));
  // A language model's compute_metrics: from the evaluation's loss alone.
  const Metrics lm = language_model_metrics({.loss = std::log(12.5)});
  ASSERT_EQ(lm.size(), 1u);
  EXPECT_EQ(lm[0].first, "perplexity");
  EXPECT_DOUBLE_EQ(lm[0].second, 12.5);
  EXPECT_TRUE(contains(error_of([] { classification_metrics({.loss = 1.0}); }), "takes language_model_metrics"));
}

TEST(Metrics, MismatchedOrEmptyInputsAreErrorsNamingThem) {
  EXPECT_TRUE(contains(error_of([] { accuracy({}, {}); }), "0 predictions for 0 labels"));
  EXPECT_TRUE(contains(error_of([] { macro_scores({1}, {1, 2}); }), "1 predictions for 2 labels"));
  const std::string message = error_of([] {
    classification_metrics({.predictions = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}),
                            .label_ids = from_vector(std::vector<int64_t>{0, 1, 1}, {3})});
  });
  EXPECT_TRUE(contains(message, "for 3 labels")) << message;
}

}  // namespace
}  // namespace remat::train
