// Evaluation metrics, as a Trainer's compute_metrics computes them (Hugging
// Face's `evaluate` names): accuracy, macro-averaged precision, recall and
// F1 over classes, and perplexity from a mean loss.
//
//   Metrics m = classification_metrics({.predictions = logits, .label_ids = labels});
//   // {"accuracy": 0.8681, "f1": 0.8667, "precision": 0.8702, "recall": 0.8681}
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace remat::train {

// What compute_metrics receives: every rank's predictions and labels of an
// evaluation, on the CPU. predictions: (N, C) scores (logits) or (N)
// predicted class ids (int64); label_ids: (N) int64.
// A language model's evaluation has no per-row scores (its logits are
// (B, T, V)): predictions and label_ids are undefined there, and `loss`
// is what its metrics come from.
struct EvalPrediction {
  Tensor predictions;
  Tensor label_ids;
  double loss = 0;  // the evaluation's mean loss over every rank's rows
};

// Named values, in the order they are printed.
using Metrics = std::vector<std::pair<std::string, double>>;
using ComputeMetrics = std::function<Metrics(const EvalPrediction&)>;

// The predicted class of each row: argmax over C of (N, C) scores, or the
// ids themselves. Errors: another shape, or labels that do not match.
std::vector<int64_t> predicted_classes(const EvalPrediction& prediction);

// The fraction of rows whose prediction is the label. Error: no rows.
double accuracy(const std::vector<int64_t>& predicted, const std::vector<int64_t>& labels);

// Per class c: precision = TP / (TP + FP), recall = TP / (TP + FN),
// F1 = 2PR / (P + R), each 0 where its denominator is 0 (scikit-learn's
// zero_division=0); macro averages over the classes that occur in either
// the labels or the predictions, as scikit-learn's average="macro".
struct ClassScores {
  double precision = 0, recall = 0, f1 = 0;
};
ClassScores macro_scores(const std::vector<int64_t>& predicted, const std::vector<int64_t>& labels);

// accuracy, f1, precision, recall (macro): the compute_metrics of a classifier.
Metrics classification_metrics(const EvalPrediction& prediction);

// exp(mean loss), the perplexity of a language model's evaluation.
double perplexity(double mean_loss);

// perplexity: the compute_metrics of a language model.
Metrics language_model_metrics(const EvalPrediction& prediction);

}  // namespace remat::train
