// The Fashion-MNIST task: an MLP 784-256-256-10 trained with AdamW on the
// images of Debian's dataset-fashion-mnist by the Trainer (train/trainer.h),
// evaluated on the test split after every epoch (loss, accuracy, macro F1,
// precision and recall). Called by `remat train --task fashion-mnist`. It
// writes files only when given an output_dir (Trainer arguments); under
// mpirun the ranks first check that they share every setting that must
// match (train/rank_agreement.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/averaging.h"
#include "data/fashion_mnist.h"
#include "train/metrics.h"
#include "train/trainer.h"
#include "train/training_arguments.h"

namespace remat::tasks {

struct FashionMnistOptions {
  std::string device = "cpu";  // cpu, or cuda[:N]
  int epochs = 3;
  int64_t batch_size = 64;
  double lr = 2e-3;
  double weight_decay = 1e-2;
  std::vector<int64_t> hidden = {256, 256};
  uint64_t seed = 0;
  int threads = 2;
  std::string data_dir = std::string(data::kFashionMnistDir);
  // Stop after this many batches per epoch (0: all), for quick runs and tests.
  int64_t max_batches = 0;
  // Distribution: under mpirun every rank trains on its shard of each epoch
  // (batch_size is per rank). Micro-batches per optimizer step; LocalSGD's
  // optimizer steps between parameter averages (0: synchronous data
  // parallel, gradients averaged every step); DiLoCo's outer step at each
  // average (needs local_sgd_steps).
  int64_t gradient_accumulation_steps = 1;
  int64_t local_sgd_steps = 0;
  std::optional<comm::DiLoCoOptions> diloco;
  // Trainer arguments by Hugging Face's names, applied last (for example
  // {"--gradient-checkpointing", "--eval-strategy", "epoch"}; see
  // train/training_arguments.h).
  std::vector<std::string> trainer_flags;
  // The flags of task_flags() the user gave ("--lr", "--epochs"; the
  // CLI's): a trainer flag that gives one of their arguments another value
  // (--batch-size 4 --per-device-train-batch-size 8) is an error naming
  // both. Empty: every field above is a default the trainer flags may replace.
  std::vector<std::string> flags_given;
};

// The task's flags that give training arguments (--epochs: num_train_epochs),
// one row each (Note [One value per setting] in train/training_arguments.cpp):
// what trainer_arguments builds from, and what flags_given is checked by.
const std::vector<train::TaskFlag<FashionMnistOptions>>& task_flags(const FashionMnistOptions&);

// The run's header line, from the arguments it trains with (the trainer
// flags' values where they give them): "task fashion-mnist: MLP
// 784-256-256-10, AdamW lr 0.002, batch 64 per rank, 3 epochs, 2 threads; 1 process".
std::string run_header(const FashionMnistOptions& options, const train::TrainingArguments& args);

struct EpochResult {
  int epoch = 0;                // 1-based
  double train_loss = 0;        // mean over the epoch's batches (rank 0's shard)
  double test_loss = 0;         // mean over the test split
  double test_accuracy = 0;     // fraction in [0, 1]
  double test_f1 = 0;           // macro F1 over the ten classes
  double seconds = 0;           // training and evaluation of this epoch
  int64_t peak_activation_bytes = 0;  // peak rise of activation + temporary bytes over a training step
  int64_t optimizer_steps = 0;        // so far, on each rank
  // This rank's traffic so far (comm/communicator.h): allreduce calls and
  // payload bytes, and seconds inside collectives.
  int64_t allreduce_calls = 0;
  int64_t allreduce_bytes = 0;
  double comm_seconds = 0;
  int ranks = 1;
};

// Trains and returns one result per epoch (the test figures are over the
// whole test split, shared out among the ranks); on_epoch is called as each
// ends, on_step after each optimizer step (its step, steps, running loss
// and the batch it trained: auto_find_batch_size may choose another);
// on_log gets each dict the Trainer logs (training, evaluation, summary;
// empty: printed as Python prints a dict).
std::vector<EpochResult> train_fashion_mnist(
    const FashionMnistOptions& options, const std::function<void(const EpochResult&)>& on_epoch = {},
    const std::function<void(const train::StepStats&)>& on_step = {},
    const std::function<void(const train::Metrics&)>& on_log = {});

// The check of every option's range that train_fashion_mnist starts with (the
// CLI calls it before printing its header): an error names the flag and value.
void check_options(const FashionMnistOptions& options);

// The Trainer arguments a run of `options` trains with: the task's defaults
// (evaluation and saving each epoch), then its trainer_flags.
train::TrainingArguments trainer_arguments(const FashionMnistOptions& options);

}  // namespace remat::tasks
