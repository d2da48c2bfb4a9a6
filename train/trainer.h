// Trainer: Hugging Face's training loop over a model and datasets, built on
// the Accelerator and LocalSGD (train/accelerator.h, train/local_sgd.h).
//
//   TrainingArguments args{.output_dir = "results", .gradient_accumulation_steps = 4,
//                          .gradient_checkpointing = true};
//   args.eval_strategy = "epoch";
//   Trainer trainer(model, args, train_set, &validation_set, classification_metrics);
//   trainer.train();
//   // {'epoch': 1.0, 'eval_loss': 0.3673, 'eval_accuracy': 0.8681, 'eval_f1': 0.8667, ...}
//
// One optimizer step per window of gradient_accumulation_steps batches
// (AdamW with the arguments' betas, epsilon and decoupled weight decay, the
// gradients clipped to max_grad_norm, the learning rate on its schedule).
// With eval_strategy "steps" the model is evaluated every eval_steps steps
// and at the last step (Hugging Face skips a last step off the interval).
// Every logging_steps steps rank 0 prints the training dict ({'loss': ...,
// 'grad_norm': ..., 'learning_rate': ..., 'epoch': ...}; the loss is the
// mean over the ranks, the hooks' losses are rank 0's); each evaluation
// prints its dict and, with an output_dir, appends it to
// output_dir/trainer_state.json's log_history. Metrics are computed over
// every rank's predictions.
//
// Saved runs (an output_dir and save_strategy not "no"):
// output_dir/checkpoint-STEP/ holds checkpoint.safetensors (weights under
// "model.", AdamW's state, LocalSGD's, and in its metadata the step, the
// epoch and batch to continue from, the model's random generators'
// offsets, the run's loss sum), trainer_state.json, training_args.json and,
// written last, manifest.json (each file's size and CRC-32,
// train/checkpoint_manifest.h). A checkpoint is written into a temporary
// folder and renamed into place, so a killed run leaves the last complete
// one; output_dir/trainer_state.json follows each save. The newest
// save_total_limit are kept (and the best, with load_best_model_at_end).
// resume_from_checkpoint continues bit for bit: N steps, stopped, then
// resumed to 2N, equal 2N steps run at once, train_loss included (under
// LocalSGD every rank resumes from rank 0's model and optimizer state, and
// each save averages the models first). A resume verifies the checkpoint
// ("latest": the newest that verifies, the skipped ones said), refuses one
// older than output_dir's newest unless overwrite_output_dir (which deletes
// the newer ones), warns of settings changed since, and trains nothing at
// or past the last step. Rank 0 writes; the output folder is locked while a
// Trainer writes there (train, evaluate).
//
// Stopped by a signal: where an InterruptScope catches SIGINT and SIGTERM
// (train/interrupt.h; the remat program holds one), a signal on any rank
// stops every rank after the optimizer step under way, as should_stop does
// (the step is saved when saving is on, without a last evaluation), and
// train() throws Interrupted naming the signal, the step and the checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "nn/module.h"
#include "nn/safetensors.h"
#include "data/data_loader.h"
#include "train/metrics.h"
#include "train/training_arguments.h"

namespace remat::train {

// What a model computes for a batch: the mean loss, and the scores that
// predictions are made of (Hugging Face models take the labels in forward).
struct ModelOutput {
  Tensor loss;
  Tensor logits;
};
using ForwardFn = std::function<ModelOutput(nn::Module& model, const data::Batch& batch)>;
// cross_entropy(model.forward(inputs), targets), and the logits.
ForwardFn classifier_forward();

struct TrainOutput {
  int64_t global_step = 0;
  int64_t resumed_at_step = 0;  // the checkpoint's step it continued from (0: from the start)
  double training_loss = 0;  // mean over the run's steps, those before a resume included
  Metrics metrics;           // train_runtime, train_samples_per_second, ..., epoch
};

struct PredictionOutput {
  Tensor predictions;  // (N, C) logits on the CPU, every rank's
  Tensor label_ids;    // (N)
  Metrics metrics;     // test_loss and compute_metrics', prefixed "test_"
};

// One epoch of training as the Trainer saw it (on rank 0).
struct EpochStats {
  int64_t epoch = 0;          // 1-based
  double train_loss = 0;      // mean over its optimizer steps
  double seconds = 0;         // its training and evaluation
  // The highest rise of activation + temporary bytes over a micro-batch's
  // forward and backward (the allocator's figure).
  int64_t peak_activation_bytes = 0;
  int64_t optimizer_steps = 0;  // so far
  Metrics eval;               // its evaluation's, if it had one
};

// One optimizer step as the Trainer saw it (on rank 0).
struct StepStats {
  int64_t step = 0;   // global steps done, this one included
  int64_t steps = 0;  // of how many
  double loss = 0;       // this step's, the mean over its micro-batches
  double mean_loss = 0;  // over this train() call's steps so far
  double grad_norm = 0;  // before clipping (0 with max_grad_norm 0)
  double learning_rate = 0;  // for the next step
  // The highest rise of activation + temporary bytes over one of its
  // micro-batches' forward and backward (the allocator's figure).
  int64_t peak_activation_bytes = 0;
  double seconds = 0;  // since train() started
  // Rows of each micro-batch on this rank (per_device_train_batch_size,
  // or the batch auto_find_batch_size chose).
  int64_t batch_size = 0;
  // Rows this step trained on this rank: its micro-batches' rows, an
  // epoch's last, smaller batch counted as it is. Throughputs count these.
  int64_t samples = 0;
};

// Hooks of a training run (Hugging Face's TrainerCallback, in small).
struct TrainerCallbacks {
  // Every dict the Trainer logs (training, evaluation, the final summary),
  // on rank 0; default: printed as Python prints a dict.
  std::function<void(const Metrics&)> on_log;
  // Asked after each optimizer step, and again after its evaluation, if
  // any: true stops training there (the state is saved first when saving
  // is on). on_log may set what this answers: early stopping.
  std::function<bool(int64_t global_step)> should_stop;
  // After each epoch that ran to its end, and after each optimizer step
  // (before its logging, evaluation and save), on rank 0.
  std::function<void(const EpochStats&)> on_epoch_end;
  std::function<void(const StepStats&)> on_step_end;
};

class Accelerator;
class PreparedOptimizer;
class PreparedScheduler;
class RunLock;

class Trainer {
 public:
  Trainer(nn::Module& model, TrainingArguments args, const data::Dataset& train_dataset,
          const data::Dataset* eval_dataset = nullptr, ComputeMetrics compute_metrics = {},
          ForwardFn forward = classifier_forward(), TrainerCallbacks callbacks = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  TrainOutput train();
  // The eval dataset's (or `dataset`'s) loss and metrics, named
  // prefix + "_" + name; logged, and added to the log history.
  Metrics evaluate(const data::Dataset* dataset = nullptr, const std::string& prefix = "eval");
  PredictionOutput predict(const data::Dataset& dataset);

  // What a step of `batch_size` rows would hold at its peak, predicted
  // from a rehearsal of it on the meta device (nothing computed) under the
  // model's checkpointing policy (none when off): what auto_find_batch_size
  // weighs each batch by. A policy that takes a budget and has none is
  // given what memory_limit leaves for activations, where one is set.
  struct BatchFit {
    int64_t batch_size = 0;
    std::string policy;
    int64_t resident = 0;     // parameters, gradients, AdamW's two moments, the batch
    int64_t activations = 0;  // the plan's predicted peak of activation and temporary bytes
    std::optional<int64_t> budget;  // given to a policy that takes one and had none
    std::string refused;            // why no plan of this batch fits (the planner's error)
    int64_t total() const { return resident + activations; }
  };
  BatchFit predict_step(int64_t batch_size);

  const TrainingArguments& args() const { return args_; }
  Accelerator& accelerator() const { return *accelerator_; }
  int64_t global_step() const { return global_step_; }
  double epoch() const { return epoch_; }
  // The global step of the latest evaluate() (-1 before one), on every rank.
  int64_t evaluated_at_step() const { return evaluated_at_; }
  const nlohmann::ordered_json& log_history() const { return log_history_; }
  // The checkpoint folder with the best metric so far ("" if none).
  const std::string& best_model_checkpoint() const { return best_checkpoint_; }
  // What every checkpoint records about the run beyond the Trainer's own
  // (a task's model configuration, vocabulary, data fingerprint), and a
  // resume must match: a difference is an error naming the key.
  void set_run_description(nn::SafetensorsMetadata description) { run_description_ = std::move(description); }

 private:
  struct Run;  // one train() call's optimizer, schedule, LocalSGD, loader and loop state
  // train()'s rooms: set-up, an epoch (a micro-batch, a step's end), the
  // evaluation and save a step or an epoch ends with, and the end.
  void set_up(Run& run);
  void run_epoch(Run& run, int64_t epoch, PreparedOptimizer& optimizer, PreparedScheduler& scheduler);
  void train_micro_batch(Run& run, const data::Batch& batch, PreparedOptimizer& optimizer,
                         PreparedScheduler& scheduler);
  void end_step(Run& run, int64_t epoch, int64_t b);
  bool told_to_stop(Run& run);
  Metrics evaluate_step(Run& run, bool eval_now);
  void save_step(Run& run, bool save_now);
  TrainOutput finish(Run& run);
  TrainOutput nothing_to_train(const Run& run) const;  // resumed at or past the last step
  struct Evaluation {
    double loss = 0;
    Tensor predictions, labels;
  };
  Evaluation run_evaluation(const data::Dataset& dataset);
  void log(Metrics metrics);
  void prepare_model();
  void save_checkpoint(Run& run);   // every rank
  void write_checkpoint(Run& run);  // rank 0
  // Note [Which checkpoint a resume trusts], Note [Runs never mix] (trainer_checkpoints.cpp).
  std::string checkpoint_to_resume() const;
  // Refuses a resume from `folder` while output_dir holds newer checkpoints
  // (unless overwrite_output_dir); returns what deletes them, to be called
  // once the resume has passed its checks (Note [Runs never mix]).
  std::function<void()> keep_runs_apart(const std::string& folder);
  void warn_changed_settings(const std::string& folder) const;
  void resume(Run& run, const std::string& folder);
  void rotate_checkpoints();
  void write_state(const std::string& path) const;
  bool better(double value) const;
  // step: the one to name (default: the step being taken).
  [[noreturn]] void stop_on_non_finite(const char* what, double value, std::optional<int64_t> step = {}) const;
  std::unique_ptr<RunLock> lock_output_dir();
  // memory_limit (trainer_batch.cpp): the largest batch that fits it with
  // auto_find_batch_size (else the batch given, checked), into args_, and
  // the budget the limit leaves for a policy that takes one and has none;
  // the check of the first step.
  void find_batch_size();
  void check_batch_fit(int64_t measured);
  // A batch of more rows than this rank's part of the training set is an
  // error naming both (every step would train on the same rows, and the
  // throughput would count rows that never ran).
  void check_batch_rows(int64_t batch_size, int64_t rows) const;
  int64_t rows_per_rank() const;  // of the training set: this rank's shard

  nn::Module& model_;
  TrainingArguments args_;
  const data::Dataset& train_dataset_;
  const data::Dataset* eval_dataset_;
  ComputeMetrics compute_metrics_;
  ForwardFn forward_;
  TrainerCallbacks callbacks_;
  std::unique_ptr<Accelerator> accelerator_;
  std::unique_ptr<RunLock> lock_;  // held by train() on rank 0
  int64_t global_step_ = 0;
  double epoch_ = 0;
  nlohmann::ordered_json log_history_ = nlohmann::ordered_json::array();
  std::optional<double> best_metric_;
  std::string best_checkpoint_;
  bool prepared_ = false;  // prepare_model() ran
  bool training_ = false;  // inside train()
  int64_t evaluated_at_ = -1;
  nn::SafetensorsMetadata run_description_;
  std::string saved_checkpoint_;  // the newest this run wrote or resumed from
  bool batch_found_ = false;      // find_batch_size ran (once per Trainer)
  std::optional<BatchFit> batch_fit_;  // its choice, until the first step checks it
};

// A dict as Python prints it: {'eval_loss': 0.3673, 'epoch': 1.0}.
std::string format_metrics(const Metrics& metrics);

}  // namespace remat::train
