// Evaluation metrics; see metrics.h.
#include "train/metrics.h"

#include <cmath>
#include <map>

#include "engine/error.h"
#include "engine/factory.h"
#include "ops/ops.h"

namespace remat::train {

std::vector<int64_t> predicted_classes(const EvalPrediction& prediction) {
  const Tensor& p = prediction.predictions;
  const Tensor& labels = prediction.label_ids;
  REMAT_CHECK(p.defined() && labels.defined(), "metrics: predictions and label_ids must both be given (an "
              "evaluation without per-row scores, a language model's, takes language_model_metrics)");
  REMAT_CHECK(labels.dim() == 1 && labels.dtype() == DType::Int64, "metrics: label_ids must be (N) int64, got {}",
              labels.str());
  REMAT_CHECK((p.dim() == 2 || (p.dim() == 1 && p.dtype() == DType::Int64)) && p.size(0) == labels.size(0),
              "metrics: predictions must be (N, C) scores or (N) int64 class ids for {} labels, got {}",
              labels.size(0), p.str());
  const Tensor ids = p.dim() == 2 ? argmax(to(p, Device::cpu()), 1) : p;
  return to(ids, Device::cpu()).to_vector<int64_t>();
}

double accuracy(const std::vector<int64_t>& predicted, const std::vector<int64_t>& labels) {
  REMAT_CHECK(!labels.empty() && predicted.size() == labels.size(), "accuracy: {} predictions for {} labels "
              "(need at least one of each, as many)", predicted.size(), labels.size());
  int64_t right = 0;
  for (size_t i = 0; i < labels.size(); ++i) right += predicted[i] == labels[i] ? 1 : 0;
  return static_cast<double>(right) / static_cast<double>(labels.size());
}

ClassScores macro_scores(const std::vector<int64_t>& predicted, const std::vector<int64_t>& labels) {
  REMAT_CHECK(!labels.empty() && predicted.size() == labels.size(), "macro_scores: {} predictions for {} labels "
              "(need at least one of each, as many)", predicted.size(), labels.size());
  struct Counts {
    int64_t tp = 0, fp = 0, fn = 0;
  };
  std::map<int64_t, Counts> classes;  // every class seen in labels or predictions
  for (size_t i = 0; i < labels.size(); ++i) {
    if (predicted[i] == labels[i]) {
      ++classes[labels[i]].tp;
    } else {
      ++classes[predicted[i]].fp;
      ++classes[labels[i]].fn;
    }
  }
  const auto ratio = [](int64_t num, int64_t den) { return den == 0 ? 0.0 : static_cast<double>(num) / den; };
  ClassScores sum;
  for (const auto& [label, c] : classes) {
    const double precision = ratio(c.tp, c.tp + c.fp), recall = ratio(c.tp, c.tp + c.fn);
    sum.precision += precision;
    sum.recall += recall;
    sum.f1 += precision + recall == 0 ? 0.0 : 2 * precision * recall / (precision + recall);
  }
  const auto n = static_cast<double>(classes.size());
  return {sum.precision / n, sum.recall / n, sum.f1 / n};
}

Metrics classification_metrics(const EvalPrediction& prediction) {
  const std::vector<int64_t> predicted = predicted_classes(prediction);
  const std::vector<int64_t> labels = prediction.label_ids.to_vector<int64_t>();
  const ClassScores macro = macro_scores(predicted, labels);
  return {{"accuracy", accuracy(predicted, labels)}, {"f1", macro.f1}, {"precision", macro.precision},
          {"recall", macro.recall}};
}

double perplexity(double mean_loss) {
  REMAT_CHECK(std::isfinite(mean_loss), "perplexity: the mean loss is {}", mean_loss);
  return std::exp(mean_loss);
}

Metrics language_model_metrics(const EvalPrediction& prediction) {
  return {{"perplexity", perplexity(prediction.loss)}};
}

}  // namespace remat::train
