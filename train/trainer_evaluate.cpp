// The Trainer's evaluation (trainer.h): evaluate() and predict() over a
// dataset split among the ranks, gathered in the dataset's order, and the
// metrics computed from it. The rest of the Trainer is in trainer.cpp.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "engine/autograd.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/ops.h"
#include "train/accelerator.h"
#include "train/run_files.h"
#include "train/trainer.h"
#include "train/trainer_run.h"

namespace remat::train {
namespace fs = std::filesystem;
using trainer_internal::Clock;
using trainer_internal::seconds_since;

Trainer::Evaluation Trainer::run_evaluation(const data::Dataset& dataset) {
  prepare_model();
  NoGradGuard no_grad;
  struct EvalMode {
    nn::Module& model;
    bool was_training = model.is_training();
    EvalMode(nn::Module& m) : model(m) { model.eval(); }
    ~EvalMode() { model.train(was_training); }
  } eval_mode(model_);
  const int64_t n = dataset.size(), ranks = accelerator_->num_processes();
  REMAT_CHECK(n > 0, "Trainer: the evaluation dataset is empty");
  // Each rank a contiguous block of rows, so that gathering in rank order
  // keeps the dataset's order.
  const int64_t per_rank = (n + ranks - 1) / ranks;
  std::vector<int64_t> rows;
  for (int64_t i = accelerator_->rank() * per_rank; i < std::min(n, (accelerator_->rank() + 1) * per_rank); ++i) {
    rows.push_back(i);
  }
  const data::DataLoader all(dataset, {.batch_size = args_.per_device_eval_batch_size, .device = accelerator_->device()});
  double loss_sum = 0;
  std::vector<double> scores;
  std::vector<int64_t> labels;
  int64_t classes = -1;  // scores per row, when the model gives (B, C) logits
  const auto chunk = static_cast<size_t>(args_.per_device_eval_batch_size);
  for (size_t first = 0; first < rows.size(); first += chunk) {
    const std::vector<int64_t> part(rows.begin() + static_cast<std::ptrdiff_t>(first),
                                    rows.begin() + static_cast<std::ptrdiff_t>(std::min(first + chunk, rows.size())));
    const data::Batch batch = all.gather(part);
    const ModelOutput out = forward_(model_, batch);
    loss_sum += out.loss.item<double>() * static_cast<double>(part.size());
    if (out.logits.defined() && out.logits.dim() == 2 && batch.targets.dim() == 1) {
      classes = out.logits.size(1);
      const std::vector<double> s = to_dtype(to(out.logits, Device::cpu()), DType::Float64).to_vector<double>();
      scores.insert(scores.end(), s.begin(), s.end());
      const std::vector<int64_t> l = to(batch.targets, Device::cpu()).to_vector<int64_t>();
      labels.insert(labels.end(), l.begin(), l.end());
    }
  }
  // Every rank's sums, and its rows padded to one length (marked invalid),
  // gathered in rank order.
  const std::vector<double> sums = accelerator_->gather(
      from_vector(std::vector<double>{loss_sum, static_cast<double>(rows.size())}, {2})).to_vector<double>();
  double total_loss = 0, total_rows = 0;
  for (size_t r = 0; r < sums.size(); r += 2) {
    total_loss += sums[r];
    total_rows += sums[r + 1];
  }
  Evaluation result{.loss = total_loss / total_rows};
  const auto padded = (n + ranks - 1) / ranks;
  // A rank with no rows has seen no logits: it takes the others' width.
  double widest = -1;
  for (const double c :
       accelerator_->gather(from_vector(std::vector<double>{static_cast<double>(classes)}, {1})).to_vector<double>()) {
    widest = std::max(widest, c);
  }
  if (widest < 0) return result;  // no per-row scores to gather
  classes = static_cast<int64_t>(widest);
  const auto local = static_cast<int64_t>(labels.size());
  scores.resize(static_cast<size_t>(padded * classes), 0.0);
  labels.resize(static_cast<size_t>(padded), -1);
  std::vector<double> valid(static_cast<size_t>(padded), 0.0);
  std::fill(valid.begin(), valid.begin() + local, 1.0);
  const std::vector<double> all_scores = accelerator_->gather(from_vector(scores, {padded, classes})).to_vector<double>();
  const std::vector<int64_t> all_labels = accelerator_->gather(from_vector(labels, {padded})).to_vector<int64_t>();
  const std::vector<double> all_valid = accelerator_->gather(from_vector(valid, {padded})).to_vector<double>();
  std::vector<double> kept_scores;
  std::vector<int64_t> kept_labels;
  for (size_t i = 0; i < all_valid.size(); ++i) {
    if (all_valid[i] == 0) continue;
    kept_labels.push_back(all_labels[i]);
    kept_scores.insert(kept_scores.end(), all_scores.begin() + static_cast<std::ptrdiff_t>(i * classes),
                       all_scores.begin() + static_cast<std::ptrdiff_t>((i + 1) * classes));
  }
  const auto kept = static_cast<int64_t>(kept_labels.size());
  result.predictions = from_vector(kept_scores, {kept, classes});
  result.labels = from_vector(kept_labels, {kept});
  return result;
}

Metrics Trainer::evaluate(const data::Dataset* dataset, const std::string& prefix) {
  const data::Dataset* target = dataset != nullptr ? dataset : eval_dataset_;
  REMAT_CHECK(target != nullptr, "Trainer::evaluate: no dataset given and no eval_dataset");
  // It writes trainer_state.json: locked, unless train() holds the lock already.
  const std::unique_ptr<RunLock> lock = training_ ? nullptr : lock_output_dir();
  const auto start = Clock::now();
  const Evaluation e = run_evaluation(*target);
  const double seconds = seconds_since(start);
  evaluated_at_ = global_step_;
  // During training, weights that diverged (finite, but too large for a
  // forward) show here: the run stops before logging or saving them.
  if (training_ && !std::isfinite(e.loss)) stop_on_non_finite("evaluation loss", e.loss, global_step_);
  Metrics metrics{{"epoch", epoch_}, {prefix + "_loss", e.loss}};
  // A NaN loss is the run's to report (a diverged model), not a metric's error.
  if (compute_metrics_ && std::isfinite(e.loss)) {
    for (const auto& [name, value] :
         compute_metrics_({.predictions = e.predictions, .label_ids = e.labels, .loss = e.loss})) {
      metrics.emplace_back(prefix + "_" + name, value);
    }
  }
  const auto samples = static_cast<double>(target->size());
  const double steps = std::ceil(samples / static_cast<double>(args_.per_device_eval_batch_size *
                                                               accelerator_->num_processes()));
  metrics.emplace_back(prefix + "_runtime", seconds);
  metrics.emplace_back(prefix + "_samples_per_second", samples / seconds);
  metrics.emplace_back(prefix + "_steps_per_second", steps / seconds);
  log(metrics);
  // During training output_dir/trainer_state.json is written with each
  // checkpoint (and at the end), so that it never names a step whose save failed.
  if (!training_ && !args_.output_dir.empty() && accelerator_->is_main_process()) {
    write_state((fs::path(args_.output_dir) / "trainer_state.json").string());
  }
  return metrics;
}

PredictionOutput Trainer::predict(const data::Dataset& dataset) {
  const Evaluation e = run_evaluation(dataset);
  PredictionOutput out{.predictions = e.predictions, .label_ids = e.labels, .metrics = {{"test_loss", e.loss}}};
  if (compute_metrics_ && std::isfinite(e.loss)) {
    for (const auto& [name, value] :
         compute_metrics_({.predictions = e.predictions, .label_ids = e.labels, .loss = e.loss})) {
      out.metrics.emplace_back("test_" + name, value);
    }
  }
  return out;
}

}  // namespace remat::train
