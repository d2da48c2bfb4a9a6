// Trainer; see trainer.h. Here: construction, logging, and train() in its
// rooms (set-up, an epoch, a micro-batch, a step's end, its evaluation and
// save, the end); evaluate() and predict() are in trainer_evaluate.cpp, the
// checkpoints (save, rotate, resume) in trainer_checkpoints.cpp.
#include "train/trainer.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>

#include "engine/allocator.h"
#include "engine/error.h"
#include "engine/factory.h"
#if REMAT_HAVE_CUDA
#include "kernels/cuda/gemm.h"
#endif
#include "nn/safetensors.h"
#include "ops/ops.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/lr_schedule.h"
#include "train/accelerator.h"
#include "train/checkpoint.h"
#include "train/interrupt.h"
#include "train/limits.h"
#include "train/local_sgd.h"
#include "train/parse.h"
#include "train/run_files.h"
#include "train/trainer_run.h"

namespace remat::train {
namespace fs = std::filesystem;
namespace {

using trainer_internal::checkpoint_folder;
using trainer_internal::checkpoints_in;
using trainer_internal::Clock;
using trainer_internal::kCheckpointFile;
using trainer_internal::seconds_since;

// A number as Python's repr would show a logged float, to 4 decimals
// (integers stay integers).
std::string shown(double value) {
  if (std::isfinite(value) && value == std::round(value) && std::abs(value) < 1e15) {
    return fmt::format("{}", static_cast<int64_t>(value));
  }
  // 4 decimals; a small value (a learning rate) in 4 significant digits.
  return value != 0 && std::abs(value) < 1e-3 ? fmt::format("{:.4g}", value) : fmt::format("{:.4f}", value);
}

optim::ScheduleKind schedule_kind(const std::string& type) {
  if (type == "cosine" || type == "cosine_with_min_lr") return optim::ScheduleKind::WarmupCosine;
  if (type == "linear") return optim::ScheduleKind::WarmupLinear;
  return optim::ScheduleKind::WarmupConstant;  // constant, constant_with_warmup
}

}  // namespace

ForwardFn classifier_forward() {
  return [](nn::Module& model, const data::Batch& batch) {
    Tensor logits = model.forward(batch.inputs);
    Tensor loss = cross_entropy(logits, batch.targets);
    return ModelOutput{std::move(loss), std::move(logits)};
  };
}

std::string format_metrics(const Metrics& metrics) {
  std::string out = "{";
  for (size_t i = 0; i < metrics.size(); ++i) {
    // The epoch to 2 decimals, as Hugging Face rounds it (1.0, 1.07).
    const double epoch = std::round(metrics[i].second * 100) / 100;
    const std::string value = metrics[i].first != "epoch" ? shown(metrics[i].second)
                              : epoch == std::round(epoch) ? fmt::format("{:.1f}", epoch)
                                                           : fmt::format("{}", epoch);
    out += fmt::format("{}'{}': {}", i ? ", " : "", metrics[i].first, value);
  }
  return out + "}";
}

Trainer::Trainer(nn::Module& model, TrainingArguments args, const data::Dataset& train_dataset,
                 const data::Dataset* eval_dataset, ComputeMetrics compute_metrics, ForwardFn forward,
                 TrainerCallbacks callbacks)
    : model_(model), args_(std::move(args)), train_dataset_(train_dataset), eval_dataset_(eval_dataset),
      compute_metrics_(std::move(compute_metrics)), forward_(std::move(forward)), callbacks_(std::move(callbacks)) {
  check(args_);
  REMAT_CHECK(forward_ != nullptr, "Trainer: no forward function");
  REMAT_CHECK(args_.eval_strategy == "no" || eval_dataset_ != nullptr, "Trainer: eval_strategy {} needs an "
              "eval_dataset", args_.eval_strategy);
  const Device device = check_device(args_.device, "Trainer");
#if REMAT_HAVE_CUDA
  if (args_.tf32) kernels::cuda::set_allow_tf32(*args_.tf32);  // for the process, as torch's allow_tf32
  if (args_.fused_epilogues) kernels::cuda::set_fused_epilogues(*args_.fused_epilogues);  // as tf32
#endif
  accelerator_ = std::make_unique<Accelerator>(
      AcceleratorOptions{.gradient_accumulation_steps = args_.gradient_accumulation_steps, .device = device});
  if (args_.gradient_checkpointing && !model_.is_gradient_checkpointing()) {
    const GradientCheckpointingKwargs& k = args_.gradient_checkpointing_kwargs;
    // Nothing silent (the Note in scheduler/plan.cpp): a plan's warnings (it
    // drops nothing, its budget is above keep-all's peak) are printed by the
    // main process, once per plan.
    const bool main_process = accelerator_->is_main_process();
    auto warn = [main_process](const scheduler::Plan& plan) {
      if (!main_process) return;
      for (const std::string& warning : plan.warnings) fmt::print(stderr, "warning: {}\n", warning);
    };
    model_.gradient_checkpointing_enable(
        {.policy = k.policy, .budget = k.budget, .overrides = k.overrides(), .first_step = k.first_step,
         .on_plan = warn});
  }
  REMAT_CHECK(!args_.load_best_model_at_end || !args_.output_dir.empty(), "Trainer: load_best_model_at_end needs an "
              "output_dir to save checkpoints in");
  if (!args_.output_dir.empty() && accelerator_->is_main_process()) {
    std::error_code error;
    fs::create_directories(args_.output_dir, error);
    REMAT_CHECK(!error && fs::is_directory(args_.output_dir), "Trainer: output_dir '{}' cannot be made ({})",
                args_.output_dir, error ? error.message() : "not a folder");
  }
}

// Held while a call writes into output_dir (train, and evaluate outside
// training): another process, or another Trainer of this one, writing there
// is refused. Only while it writes, so that a new Trainer on the folder of
// an idle one (a notebook's cell run again) is free to train. Rank 0 takes
// it; every rank learns whether it could, so that none goes on alone.
std::unique_ptr<RunLock> Trainer::lock_output_dir() {
  if (args_.output_dir.empty()) return nullptr;
  std::unique_ptr<RunLock> lock;
  std::exception_ptr refused;
  if (accelerator_->is_main_process()) {
    try {
      lock = std::make_unique<RunLock>(args_.output_dir, "output_dir",
                                       (fs::path(args_.output_dir) / "trainer.lock").string());
      // What a killed save left (its temporary folder), now that no one else writes here.
      for (const fs::directory_entry& entry : fs::directory_iterator(args_.output_dir)) {
        if (entry.path().filename().string().starts_with(".checkpoint-")) fs::remove_all(entry.path());
      }
    } catch (...) {
      refused = std::current_exception();
    }
  }
  int64_t failed = refused ? 1 : 0;
  if (accelerator_->num_processes() > 1) accelerator_->host_communicator().broadcast(&failed, 1, DType::Int64, 0);
  if (refused) std::rethrow_exception(refused);
  REMAT_CHECK(failed == 0, "Trainer: rank 0 could not lock output_dir '{}' (its error says why)", args_.output_dir);
  return lock;
}

void Trainer::prepare_model() {
  if (prepared_) return;
  accelerator_->prepare(model_);  // moved to the device, rank 0's parameters everywhere
  prepared_ = true;
}

Trainer::~Trainer() = default;

void Trainer::log(Metrics metrics) {
  if (!accelerator_->is_main_process()) return;
  if (callbacks_.on_log) {
    callbacks_.on_log(metrics);
  } else {
    fmt::print("{}\n", format_metrics(metrics));
    std::fflush(stdout);
  }
  nlohmann::ordered_json entry;
  for (const auto& [name, value] : metrics) entry[name] = value;
  entry["step"] = global_step_;
  log_history_.push_back(std::move(entry));
}

bool Trainer::better(double value) const {
  const std::string& name = args_.metric_for_best_model;
  const bool greater = args_.greater_is_better.value_or(!name.ends_with("loss"));
  return !best_metric_ || (greater ? value > *best_metric_ : value < *best_metric_);
}

// A NaN or infinity stops the run before it reaches the weights, and so
// before a save could write a checkpoint of them.
void Trainer::stop_on_non_finite(const char* what, double value, std::optional<int64_t> step) const {
  const std::string checkpoint = saved_checkpoint_.empty() ? "no checkpoint of this run was written"
                                 : fmt::format("its newest checkpoint, '{}', is left as it was", saved_checkpoint_);
  REMAT_FAIL("Trainer: step {}: the {} is {}, so training stopped ({}); a smaller learning_rate (this run's peak is "
             "{}) may help", step.value_or(global_step_ + 1), what, value, checkpoint, args_.learning_rate);
}

TrainOutput Trainer::train() {
  REMAT_CHECK(!training_, "Trainer::train: this Trainer is training already (train() called from its own "
              "callback?)");
  prepare_model();
  if (args_.memory_limit && !batch_found_) {
    find_batch_size();  // before the loader is made with the batch it sets
    batch_found_ = true;
  }
  struct Training {
    bool& flag;
    explicit Training(bool& f) : flag(f) { flag = true; }
    ~Training() { flag = false; }
  } training(training_);
  lock_ = lock_output_dir();
  struct Unlock {
    std::unique_ptr<RunLock>& lock;
    ~Unlock() { lock.reset(); }
  } unlock{lock_};
  Run run;
  set_up(run);
  if (!run.resumed_from.empty() && global_step_ >= run.total_steps) return nothing_to_train(run);
  PreparedOptimizer optimizer = accelerator_->prepare(*run.adamw);
  PreparedScheduler scheduler = accelerator_->prepare(*run.schedule);
  run.eval_every = args_.eval_steps.value_or(args_.logging_steps);
  run.first_step = global_step_;
  const scheduler::PlanOptions* plan = model_.checkpointing_options();
  if (plan && scheduler::rehearses_first_step(*plan) && global_step_ < run.total_steps) {
    // The first step under the policy and within the budget too (or the run
    // refused before it): planned from a rehearsal of it on the meta device
    // (Note [The first step] in scheduler/checkpointer.h). A plan already
    // made (from a saved profile, or an earlier train()) is found by the
    // rehearsal's graph, and a saved profile of another graph is refused.
    const data::Batch batch = run.loader->epoch(run.next_epoch).batch(run.next_batch);
    model_.rehearse_checkpointing([&] { forward_(model_, batch).loss.backward(); });
  }
  run.start = Clock::now();
  run.stop = global_step_ >= run.total_steps;
  for (int64_t epoch = run.next_epoch; !run.stop; ++epoch) run_epoch(run, epoch, optimizer, scheduler);
  TrainOutput output = finish(run);
  // Stopped by a signal, after the step's save: the caller goes no further
  // (the CLI exits with 128 + the signal).
  if (run.stop_signal != 0) {
    throw Interrupted(run.stop_signal, global_step_, run.saving ? saved_checkpoint_ : std::string(),
                      args_.output_dir);
  }
  return output;
}

// A checkpoint at or past the run's last step (a finished run resumed, or
// max_steps lowered): said, and nothing trained, logged or written (no
// train_loss of 0, no second evaluation of the same step).
TrainOutput Trainer::nothing_to_train(const Run& run) const {
  if (accelerator_->is_main_process()) {
    const std::string last = args_.max_steps > 0
                                 ? fmt::format("max_steps is {}", args_.max_steps)
                                 : fmt::format("num_train_epochs {} make {} steps", args_.num_train_epochs,
                                               run.total_steps);
    fmt::print(stderr, "warning: nothing to train: the checkpoint is at step {}, {} (resumed from '{}'; nothing "
               "was logged or written)\n", global_step_, last, run.resumed_from);
    std::fflush(stderr);
  }
  return {.global_step = global_step_, .resumed_at_step = global_step_,
          .training_loss = run.loss_steps > 0 ? run.loss_sum / static_cast<double>(run.loss_steps) : 0.0};
}

// The optimizer, loader, schedule and LocalSGD of a run, and where it
// starts: a checkpoint to resume, or an output folder to clear.
void Trainer::set_up(Run& run) {
  run.params = model_.parameters();
  run.adamw = std::make_unique<optim::AdamW>(run.params, optim::AdamWOptions{
      .lr = args_.learning_rate, .beta1 = args_.adam_beta1, .beta2 = args_.adam_beta2, .eps = args_.adam_epsilon,
      .weight_decay = args_.weight_decay});
  run.loader.emplace(accelerator_->prepare(data::DataLoader(
      train_dataset_, {.batch_size = args_.per_device_train_batch_size, .shuffle = true, .seed = args_.seed})));
  const int64_t k = args_.gradient_accumulation_steps;
  run.batches = run.loader->size();
  REMAT_CHECK(run.batches > 0, "Trainer: the training dataset gives no batches (it has {} rows)",
              train_dataset_.size());
  check_batch_rows(args_.per_device_train_batch_size, run.loader->shard_rows());
  run.steps_per_epoch = (run.batches + k - 1) / k;
  run.total_steps = args_.max_steps > 0 ? args_.max_steps
                                        : static_cast<int64_t>(std::ceil(args_.num_train_epochs *
                                                                         static_cast<double>(run.steps_per_epoch)));
  const int64_t warmup = args_.lr_scheduler_type == "constant" ? 0
                         : args_.warmup_steps > 0
                             ? args_.warmup_steps
                             : static_cast<int64_t>(std::ceil(args_.warmup_ratio * static_cast<double>(run.total_steps)));
  run.schedule = std::make_unique<optim::LRScheduler>(
      *run.adamw, schedule_kind(args_.lr_scheduler_type),
      optim::ScheduleOptions{.warmup_steps = std::min(warmup, run.total_steps), .total_steps = run.total_steps,
                             .min_lr_ratio = args_.lr_scheduler_kwargs.min_lr_rate.value_or(0.0)});
  if (args_.local_sgd_steps > 0) {
    run.local_sgd = std::make_unique<LocalSGD>(
        *accelerator_, model_,
        LocalSGDOptions{.local_sgd_steps = args_.local_sgd_steps, .enabled = true,
                        .diloco = args_.diloco ? std::optional<comm::DiLoCoOptions>(
                                                     comm::DiLoCoOptions{args_.outer_lr, args_.outer_momentum})
                                               : std::nullopt});
  }
  run.resumed_from = checkpoint_to_resume();
  run.saving = !args_.output_dir.empty() && args_.save_strategy != "no";
  if (!run.resumed_from.empty()) {
    const std::function<void()> delete_newer = keep_runs_apart(run.resumed_from);
    resume(run, run.resumed_from);
    delete_newer();
  } else if (run.saving && !checkpoints_in(args_.output_dir).empty()) {
    REMAT_CHECK(args_.overwrite_output_dir, "Trainer: output_dir '{}' already holds checkpoints; give "
                "resume_from_checkpoint to continue, or overwrite_output_dir to start over",
                args_.output_dir);
    if (accelerator_->is_main_process()) {
      for (const fs::path& folder : checkpoints_in(args_.output_dir)) fs::remove_all(folder);
    }
  }
}

// Out of time, or told to stop (should_stop): rank 0's decision, for every
// rank. Or a signal caught by an InterruptScope (train/interrupt.h) on any
// rank, kept in run.stop_signal (rank 0's, else the first rank's that has one).
bool Trainer::told_to_stop(Run& run) {
  std::array<int64_t, 2> mine{(args_.max_time && seconds_since(run.start) >= *args_.max_time) ||
                                  (callbacks_.should_stop && callbacks_.should_stop(global_step_)),
                              pending_stop_signal()};
  std::vector<int64_t> all(mine.begin(), mine.end());
  if (accelerator_->num_processes() > 1) {
    all.resize(mine.size() * static_cast<size_t>(accelerator_->num_processes()));
    accelerator_->host_communicator().allgather(mine.data(), all.data(), 2, DType::Int64);
  }
  for (size_t rank = 0; rank < all.size() / 2 && run.stop_signal == 0; ++rank) {
    run.stop_signal = static_cast<int>(all[2 * rank + 1]);
  }
  return all[0] != 0 || run.stop_signal != 0;
}

// The step's evaluation, and the metric that picks the best checkpoint.
Metrics Trainer::evaluate_step(Run& run, bool eval_now) {
  run.metric.reset();
  if (!eval_now) return Metrics{};
  if (run.local_sgd) run.local_sgd->finish();  // every rank evaluates the same model
  const std::string name = args_.metric_for_best_model.starts_with("eval_") ? args_.metric_for_best_model
                                                                            : "eval_" + args_.metric_for_best_model;
  Metrics evaluated = evaluate();
  for (const auto& [key, value] : evaluated) {
    if (key == name) run.metric = value;
  }
  REMAT_CHECK(!args_.load_best_model_at_end || run.metric, "Trainer: metric_for_best_model {} is not among the "
              "evaluation's metrics", name);
  return evaluated;
}

// Its save: the best checkpoint is the one saved at the step of the best evaluation.
void Trainer::save_step(Run& run, bool save_now) {
  if (!save_now || !run.saving) return;
  if (run.metric && args_.load_best_model_at_end && better(*run.metric)) {
    best_metric_ = run.metric;
    best_checkpoint_ = checkpoint_folder(args_.output_dir, global_step_);
  }
  save_checkpoint(run);
}

// One epoch from where the run stands: its micro-batches, each window's
// optimizer step, then the epoch's own evaluation and save.
void Trainer::run_epoch(Run& run, int64_t epoch, PreparedOptimizer& optimizer, PreparedScheduler& scheduler) {
  run.epoch_done = false;
  const auto epoch_start = Clock::now();
  run.epoch_loss = 0;
  run.epoch_steps = 0;
  run.epoch_peak = 0;
  const data::DataLoader::Epoch batches = run.loader->epoch(epoch);
  const int64_t first_batch = epoch == run.next_epoch ? run.next_batch : 0;
  for (int64_t b = first_batch; b < run.batches && !run.stop; ++b) {
    train_micro_batch(run, batches.batch(b), optimizer, scheduler);
    if (!accelerator_->sync_gradients()) continue;
    end_step(run, epoch, b);
  }
  if (!run.epoch_done) return;
  const Metrics evaluated = evaluate_step(run, args_.eval_strategy == "epoch");
  if (!evaluated.empty() && !run.stop) run.stop = told_to_stop(run);
  // A signal caught at the epoch's evaluation saves its step (unless saved already).
  const bool saved_here = saved_checkpoint_ == checkpoint_folder(args_.output_dir, global_step_);
  save_step(run, args_.save_strategy == "epoch" || (run.stop_signal != 0 && !saved_here));
  if (callbacks_.on_epoch_end && accelerator_->is_main_process()) {
    callbacks_.on_epoch_end({.epoch = epoch + 1,
                             .train_loss = run.epoch_steps > 0
                                               ? run.epoch_loss / static_cast<double>(run.epoch_steps) : 0.0,
                             .seconds = seconds_since(epoch_start),
                             .peak_activation_bytes = run.epoch_peak,
                             .optimizer_steps = global_step_,
                             .eval = evaluated});
  }
}

// One micro-batch: forward and backward inside the accumulation window, and
// on its last micro-batch the checks, clipping and the optimizer's step.
void Trainer::train_micro_batch(Run& run, const data::Batch& batch, PreparedOptimizer& optimizer,
                                PreparedScheduler& scheduler) {
  Allocator& allocator = allocator_for(accelerator_->device());
  auto window = accelerator_->accumulate(model_);
  const MemoryStats before = allocator.stats();
  const int64_t transient_before = before.live_transient;
  double loss = 0;
  int64_t peak_total = 0;
  {
    ScopedPeak peak(accelerator_->device());
    const ModelOutput out = forward_(model_, batch);
    loss = out.loss.item<double>();
    if (!std::isfinite(loss) && !run.bad_loss) run.bad_loss = loss;
    accelerator_->backward(out.loss);
    run.step_peak = std::max(run.step_peak, peak.stats().peak_transient - transient_before);
    peak_total = peak.stats().peak_total;
  }
  run.window_loss += loss;
  ++run.window_batches;
  run.window_samples += batch.inputs.size(0);
  if (accelerator_->sync_gradients()) {
    // With data parallelism every rank holds the averaged gradients
    // here, so a NaN from one rank's batch stops every rank at this
    // same check instead of leaving the others waiting in a collective;
    // a rank's own non-finite loss is reported after it. (Under LocalSGD,
    // or without clipping, a rank stops alone, and the job ends by the
    // CLI's MPI_Abort or the collective timeout.)
    if (args_.max_grad_norm > 0) {
      run.grad_norm = optim::clip_grad_norm(run.params, args_.max_grad_norm);
      if (!std::isfinite(run.grad_norm)) stop_on_non_finite("gradient norm", run.grad_norm);
    }
    if (run.bad_loss) stop_on_non_finite("loss", *run.bad_loss);
  }
  optimizer.step();
  if (batch_fit_ && accelerator_->sync_gradients()) {  // auto_find_batch_size's choice, as it ran
    using enum MemoryCategory;
    check_batch_fit(peak_total - before.live_of(Data) + allocator.stats().live_of(OptimizerState) -
                    before.live_of(OptimizerState));
  }
  scheduler.step();
  optimizer.zero_grad();
  if (run.local_sgd) run.local_sgd->step();
}

// After an optimizer step (batch b of `epoch` ended its window): the
// counters, the step's callback and log, then its evaluation and save.
void Trainer::end_step(Run& run, int64_t epoch, int64_t b) {
  ++global_step_;
  run.next_epoch = b + 1 == run.batches ? epoch + 1 : epoch;
  run.next_batch = b + 1 == run.batches ? 0 : b + 1;
  epoch_ = static_cast<double>(epoch) + static_cast<double>(b + 1) / static_cast<double>(run.batches);
  const double step_loss = run.window_loss / static_cast<double>(run.window_batches);
  run.logged_loss += step_loss;
  run.run_loss += step_loss;
  run.loss_sum += step_loss;
  ++run.loss_steps;
  run.epoch_loss += step_loss;
  ++run.epoch_steps;
  ++run.logged_steps;
  run.epoch_peak = std::max(run.epoch_peak, run.step_peak);
  if (callbacks_.on_step_end && accelerator_->is_main_process()) {
    callbacks_.on_step_end({.step = global_step_, .steps = run.total_steps, .loss = step_loss,
                            .mean_loss = run.run_loss / static_cast<double>(global_step_ - run.first_step),
                            .grad_norm = run.grad_norm, .learning_rate = run.schedule->last_lr(),
                            .peak_activation_bytes = run.step_peak, .seconds = seconds_since(run.start),
                            .batch_size = args_.per_device_train_batch_size, .samples = run.window_samples});
  }
  run.samples += run.window_samples;
  run.step_peak = 0;
  run.window_loss = 0;
  run.window_batches = 0;
  run.window_samples = 0;
  if (global_step_ % args_.logging_steps == 0) {
    // The mean over the ranks, as Hugging Face logs it (every rank logs
    // at this step, so each joins the gather).
    double loss = run.logged_loss / static_cast<double>(run.logged_steps);
    if (accelerator_->num_processes() > 1) {
      const std::vector<double> losses =
          accelerator_->gather(from_vector(std::vector<double>{loss}, {1})).to_vector<double>();
      loss = 0;
      for (const double l : losses) loss += l / static_cast<double>(losses.size());
    }
    log({{"loss", loss}, {"grad_norm", run.grad_norm},
         {"learning_rate", run.schedule->last_lr()}, {"epoch", epoch_}});
    run.logged_loss = 0;
    run.logged_steps = 0;
  }
  run.stop = global_step_ >= run.total_steps || told_to_stop(run);
  run.epoch_done = b + 1 == run.batches;
  // An epoch's own evaluation and save come after its last step.
  // The last step is evaluated too, off the interval or not, before its
  // save (but not one a signal stopped: it saves and ends at once); an
  // evaluation's log may ask to stop too (early stopping).
  const bool eval_now = args_.eval_strategy == "steps" &&
                        (global_step_ % run.eval_every == 0 || (run.stop && run.stop_signal == 0));
  evaluate_step(run, eval_now);
  if (eval_now && !run.stop) run.stop = told_to_stop(run);
  save_step(run, (args_.save_strategy == "steps" && (global_step_ % args_.save_steps == 0 || run.stop)) ||
                     (args_.save_strategy == "epoch" && run.stop && !run.epoch_done));
}

// The run's end: LocalSGD's last average, the best model loaded back, the
// run's figures logged, and trainer_state.json written.
TrainOutput Trainer::finish(Run& run) {
  if (run.local_sgd) run.local_sgd->finish();
  if (args_.load_best_model_at_end && !best_checkpoint_.empty()) {
    load_checkpoint((fs::path(best_checkpoint_) / kCheckpointFile).string(), model_, *run.adamw,
                    run.local_sgd.get());
  }
  const double seconds = seconds_since(run.start);
  const int64_t steps = global_step_ - run.first_step;
  // The rows the steps really trained (every rank's shard has as many), not
  // steps x batch: an epoch's last batch may be smaller.
  const double samples = static_cast<double>(run.samples * accelerator_->num_processes());
  TrainOutput output{.global_step = global_step_, .resumed_at_step = run.resumed_from.empty() ? 0 : run.first_step,
                     .training_loss = run.loss_steps > 0 ? run.loss_sum / static_cast<double>(run.loss_steps) : 0.0,
                     .metrics = {{"train_runtime", seconds}, {"train_samples_per_second", samples / seconds},
                                 {"train_steps_per_second", static_cast<double>(steps) / seconds}}};
  output.metrics.emplace_back("train_loss", output.training_loss);
  output.metrics.emplace_back("epoch", epoch_);
  log(output.metrics);
  if (!args_.output_dir.empty() && accelerator_->is_main_process()) {
    write_state((fs::path(args_.output_dir) / "trainer_state.json").string());
  }
  return output;
}
}  // namespace remat::train
