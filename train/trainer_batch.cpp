// The Trainer's memory_limit and auto_find_batch_size (training_arguments.h):
// the largest per-device batch whose step fits memory_limit (or, without
// auto_find_batch_size, whether the batch given does), decided before training
// by rehearsing the step on the meta device (scheduler::Checkpointer::
// rehearse: shapes and bytes, nothing computed), and checked against the
// allocator on the first real step. Hugging Face's find_executable_batch_size
// halves the batch after each out-of-memory error; here the same halving
// runs on predictions, so nothing runs out of memory to find out.
#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "engine/allocator.h"
#include "engine/error.h"
#include "scheduler/checkpointer.h"
#include "scheduler/search.h"
#include "train/accelerator.h"
#include "train/trainer.h"

namespace remat::train {
namespace {

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

int64_t parameter_bytes(nn::Module& model) {
  int64_t bytes = 0;
  for (const Tensor& p : model.parameters()) bytes += static_cast<int64_t>(p.nbytes());
  return bytes;
}

}  // namespace

// The step of a batch of `batch_size` rows (the first of epoch 0, on this
// rank), rehearsed under the model's checkpointing policy (none when off).
Trainer::BatchFit Trainer::predict_step(int64_t batch_size) {
  REMAT_CHECK(batch_size >= 1, "Trainer::predict_step: batch_size must be at least 1, got {}", batch_size);
  prepare_model();  // on its device
  const data::DataLoader loader = accelerator_->prepare(
      data::DataLoader(train_dataset_, {.batch_size = batch_size, .shuffle = true, .seed = args_.seed}));
  const data::Batch batch = loader.epoch(0).batch(0);
  const scheduler::PlanOptions* enabled = model_.checkpointing_options();
  scheduler::PlanOptions plan = enabled ? *enabled : scheduler::PlanOptions{.policy = "none"};
  BatchFit fit{.batch_size = batch_size, .policy = plan.policy};
  // Parameters, their gradients, AdamW's exp_avg and exp_avg_sq (all the
  // parameters' size), and the batch: alive through the step, the
  // gradients counted whole although backward makes them one by one.
  fit.resident = 4 * parameter_bytes(model_) + static_cast<int64_t>(batch.inputs.nbytes() + batch.targets.nbytes());
  if (enabled && scheduler::takes_budget(plan.policy) && !plan.budget && args_.memory_limit) {
    fit.budget = *args_.memory_limit - fit.resident;
    plan.budget = fit.budget;
    if (*fit.budget < 1) {
      fit.refused = "the limit leaves nothing for activations";
      return fit;
    }
  }
  if (plan.policy == "dtr") {  // plans nothing: its budget holds at run time
    fit.activations = plan.budget.value_or(0);
    return fit;
  }
  // The graph, recorded on the meta device under a probe that plans
  // nothing (its recording is the outer one, so the model's own
  // checkpointer sees nothing), then planned once under the policy with
  // nominal times, as the Checkpointer plans a rehearsed first step.
  scheduler::Checkpointer probe({.policy = "none"}, accelerator_->device());
  probe.rehearse([&] {
    Tensor loss;
    {
      const auto recording = probe.record();
      loss = forward_(model_, batch).loss;
    }
    loss.backward();
  });
  REMAT_CHECK(probe.profile() != nullptr, "Trainer: auto_find_batch_size: the rehearsal of batch {} recorded no graph",
              batch_size);
  try {
    fit.activations = scheduler::make_plan(scheduler::search::roofline_times(*probe.profile()), plan).predicted.peak_bytes;
  } catch (const Error& e) {
    fit.refused = e.what();  // a budget below the graph's minimum
  }
  return fit;
}

int64_t Trainer::rows_per_rank() const {
  return accelerator_->prepare(data::DataLoader(train_dataset_, {.batch_size = 1})).shard_rows();
}

void Trainer::check_batch_rows(int64_t batch_size, int64_t rows) const {
  const int ranks = accelerator_->num_processes();
  REMAT_CHECK(batch_size <= rows, "Trainer: per_device_train_batch_size (--batch-size) {} is more than the {} rows of "
              "the training set{}: every step would train on those {} rows; give a batch of at most {}, or "
              "auto_find_batch_size with a memory_limit (it starts from the rows there are)", batch_size, rows,
              ranks > 1 ? fmt::format(" per rank ({} rows over {} ranks)", train_dataset_.size(), ranks) : "", rows,
              rows);
}

void Trainer::find_batch_size() {
  const int64_t limit = *args_.memory_limit;
  const bool main = accelerator_->is_main_process();
  const bool search = args_.auto_find_batch_size;  // else the batch given is only checked
  const char* who = search ? "auto_find_batch_size" : "memory_limit";
  auto say = [&](const std::string& line) {
    if (!main) return;
    fmt::print("{}: {}\n", who, line);
    std::fflush(stdout);
  };
  const auto describe = [&](const BatchFit& fit) {
    return fmt::format("predicted peak {:.2f} MiB (parameters, gradients, AdamW's state and batch {:.2f} MiB, "
                       "activations {:.2f} MiB under policy {}{})", mib(fit.total()), mib(fit.resident),
                       mib(fit.activations), fit.policy,
                       fit.budget ? fmt::format(" with the budget the limit leaves, {:.2f} MiB", mib(*fit.budget)) : "");
  };
  // A batch of more rows than the data: the search starts from the rows
  // there are (a larger batch would train on the same rows); the batch
  // given alone is Trainer::set_up's error.
  const int64_t rows = rows_per_rank();
  if (search && args_.per_device_train_batch_size > rows) {
    say(fmt::format("per_device_train_batch_size {} is more than the {} rows of the training set{}: starting from {}",
                    args_.per_device_train_batch_size, rows, accelerator_->num_processes() > 1 ? " per rank" : "",
                    rows));
    args_.per_device_train_batch_size = rows;
  } else if (!search) {
    check_batch_rows(args_.per_device_train_batch_size, rows);
  }
  std::optional<BatchFit> smallest;
  for (int64_t batch = args_.per_device_train_batch_size; batch >= 1; batch = search ? batch / 2 : 0) {
    BatchFit fit = predict_step(batch);
    if (fit.refused.empty() && fit.total() <= limit) {
      say(fmt::format("per_device_train_batch_size {} (of {}): {}, within memory_limit {:.2f} MiB", batch,
                      args_.per_device_train_batch_size, describe(fit), mib(limit)));
      args_.per_device_train_batch_size = batch;
      if (fit.budget) {  // the policy plans within what the limit leaves
        scheduler::PlanOptions plan = *model_.checkpointing_options();
        plan.budget = fit.budget;
        model_.gradient_checkpointing_disable();
        model_.gradient_checkpointing_enable(plan);  // the user's kwargs stay as given: the budget is derived
      }
      // The first step is checked against the prediction only where it runs
      // the predicted plan: not a profiling first step (run under blocks),
      // nor dtr (its prediction is its budget, which a step may exceed).
      const scheduler::PlanOptions* plan = model_.checkpointing_options();
      if (!plan || (plan->first_step != "profile" && plan->policy != "dtr")) batch_fit_ = fit;
      return;
    }
    say(fmt::format("batch {} does not fit memory_limit {:.2f} MiB: {}", batch, mib(limit),
                    fit.refused.empty() ? describe(fit) : fit.refused));
    smallest = std::move(fit);
  }
  REMAT_CHECK(search, "Trainer: memory_limit: per_device_train_batch_size {} does not fit memory_limit {:.2f} MiB: {}; "
              "give auto_find_batch_size to train at the largest batch that fits", args_.per_device_train_batch_size,
              mib(limit), smallest->refused.empty() ? describe(*smallest) : smallest->refused);
  REMAT_FAIL("Trainer: auto_find_batch_size: no batch from per_device_train_batch_size {} down to 1 fits memory_limit "
             "{:.2f} MiB: batch 1 {}; give a larger memory_limit{}", args_.per_device_train_batch_size, mib(limit),
             smallest->refused.empty() ? describe(*smallest) : "cannot plan: " + smallest->refused,
             smallest->policy == "none" ? " or turn gradient_checkpointing on" : " or a policy that keeps less");
}

// The first real step at the batch found: what the allocator counted
// against the prediction. The device's bytes at the peak of forward and
// backward (the batch among them) less the data sets' (Data: a GPU would
// hold them on the host), plus AdamW's state, made after that first peak
// but alive at every later one.
void Trainer::check_batch_fit(int64_t measured) {
  const BatchFit& fit = *batch_fit_;
  const int64_t limit = *args_.memory_limit;
  if (accelerator_->is_main_process()) {
    fmt::print("{}: the first step at batch {} held {:.2f} MiB at its peak (predicted {:.2f} MiB, memory_limit "
               "{:.2f} MiB)\n", args_.auto_find_batch_size ? "auto_find_batch_size" : "memory_limit", fit.batch_size,
               mib(measured), mib(fit.total()), mib(limit));
    std::fflush(stdout);
  }
  REMAT_CHECK(measured <= limit, "Trainer: memory_limit: the first step at batch {} held {:.2f} MiB, over "
              "memory_limit {:.2f} MiB, though {:.2f} MiB was predicted (please report this)", fit.batch_size,
              mib(measured), mib(limit), mib(fit.total()));
  batch_fit_.reset();  // checked once
}

}  // namespace remat::train
