// The Fashion-MNIST training task; see fashion_mnist_task.h.
#include "tasks/fashion_mnist_task.h"

#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <numeric>

#include "comm/mpi.h"
#include "engine/allocator.h"
#include "engine/factory.h"
#include "kernels/cpu/parallel.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "train/accelerator.h"
#include "data/data_loader.h"
#include "train/limits.h"
#include "train/rank_agreement.h"
#include "train/trainer.h"
#include "train/training_arguments.h"

namespace remat::tasks {

using namespace remat::train;  // the Trainer, its arguments and its checks
namespace {

// The first `rows` rows of `dataset` (all of them when it has fewer).
data::Dataset first_rows(const data::Dataset& dataset, int64_t rows) {
  if (rows >= dataset.size()) return dataset;
  std::vector<int64_t> first(static_cast<size_t>(rows));
  std::iota(first.begin(), first.end(), int64_t{0});
  return data::select_rows(dataset, first);
}


// What must be the same on every rank: the model, the shuffle, the epoch's
// length and everything that decides when the ranks communicate.
std::vector<Setting> shared_settings(const FashionMnistOptions& o) {
  const auto text = [](auto value) { return fmt::format("{}", value); };
  return {{"--epochs", text(o.epochs)}, {"--batch-size", text(o.batch_size)}, {"--lr", text(o.lr)},
          {"--weight-decay", text(o.weight_decay)}, {"hidden", fmt::format("{}", fmt::join(o.hidden, "-"))},
          {"--seed", text(o.seed)}, {"--max-batches", text(o.max_batches)},
          {"--gradient-accumulation-steps", text(o.gradient_accumulation_steps)},
          {"--local-sgd-steps", text(o.local_sgd_steps)},
          {"--diloco", o.diloco ? fmt::format("outer lr {}, momentum {}", o.diloco->outer_lr, o.diloco->momentum)
                                : std::string("off")},
          {"trainer arguments", fmt::format("{}", fmt::join(o.trainer_flags, " "))}};
}

}  // namespace

namespace {

using Args = TrainingArguments;
using Options = FashionMnistOptions;

}  // namespace

const std::vector<TaskFlag<FashionMnistOptions>>& task_flags(const FashionMnistOptions&) {
  static const std::vector<TaskFlag<Options>> table = with_shared_task_flags<Options>({
      {"--epochs", "num_train_epochs", [](Args& a, const Options& o) { a.num_train_epochs = o.epochs; }},
      {"--batch-size", "per_device_train_batch_size",
       [](Args& a, const Options& o) { a.per_device_train_batch_size = o.batch_size; }},
  });
  return table;
}

TrainingArguments trainer_arguments(const FashionMnistOptions& o) {
  // The task's own choices, which no flag of its gives.
  TrainingArguments defaults;
  defaults.per_device_eval_batch_size = 1000;
  defaults.eval_strategy = "epoch";
  defaults.save_strategy = "epoch";  // where an output_dir is given
  TrainingArguments args = with_task_flags(defaults, task_flags(o), o);
  apply_flags(args, o.trainer_flags);
  return args;
}

std::string run_header(const FashionMnistOptions& o, const TrainingArguments& args) {
  return fmt::format("task fashion-mnist: MLP 784-{}-10, AdamW lr {}, batch {} per rank, {}, {} threads; {}",
                     fmt::join(o.hidden, "-"), args.learning_rate, args.per_device_train_batch_size,
                     args.max_steps > 0 ? fmt::format("{} steps", args.max_steps)
                                        : fmt::format("{} epochs", args.num_train_epochs),
                     o.threads, describe_distribution(args));
}

// Every option, before the data is read.
void check_options(const FashionMnistOptions& o) {
  check_task_flags(task_flags(o), o, o.flags_given, o.trainer_flags);  // one value per setting, first
  REMAT_CHECK(check_device(o.device, "train").is_cpu() || !o.diloco, "train: --diloco's outer step runs on the "
              "CPU only, not on --device {}", o.device);
  REMAT_CHECK(o.epochs >= 1, "train: --epochs must be at least 1, got {}", o.epochs);
  REMAT_CHECK(o.batch_size >= 1, "train: --batch-size must be at least 1, got {}", o.batch_size);
  REMAT_CHECK(std::isfinite(o.lr) && o.lr > 0, "train: --lr must be > 0, got {}", o.lr);
  REMAT_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "train: --weight-decay must be >= 0, got {}",
              o.weight_decay);
  for (const int64_t width : o.hidden) REMAT_CHECK(width >= 1, "train: hidden widths must be at least 1, got {}", width);
  REMAT_CHECK(o.max_batches >= 0, "train: --max-batches must be >= 0 (0: all), got {}", o.max_batches);
  check_threads(o.threads, "train");
  check_distribution(o.gradient_accumulation_steps, o.local_sgd_steps, o.diloco);
  check(trainer_arguments(o));
}

std::vector<EpochResult> train_fashion_mnist(const FashionMnistOptions& options,
                                             const std::function<void(const EpochResult&)>& on_epoch,
                                             const std::function<void(const StepStats&)>& on_step,
                                             const std::function<void(const Metrics&)>& on_log) {
  check_options(options);
  kernels::cpu::set_num_threads(options.threads);
  const TrainingArguments args = trainer_arguments(options);
  const data::Dataset all_train = data::load_fashion_mnist("train", options.data_dir);
  const data::Dataset test_set = data::load_fashion_mnist("test", options.data_dir);
  const int64_t ranks = std::max(1, comm::Mpi::launch_size());
  const data::Dataset train_set =
      options.max_batches > 0 ? first_rows(all_train, options.max_batches * args.per_device_train_batch_size * ranks)
                              : all_train;
  std::vector<int64_t> sizes{train_set.inputs.size(1)};
  sizes.insert(sizes.end(), options.hidden.begin(), options.hidden.end());
  sizes.push_back(data::kFashionMnistClasses);

  Generator generator(options.seed);
  nn::MLP model(sizes, generator);
  std::vector<EpochResult> results;
  Trainer* running = nullptr;
  TrainerCallbacks callbacks{.on_log = on_log};
  callbacks.on_epoch_end = [&](const EpochStats& stats) {
    EpochResult result{.epoch = static_cast<int>(stats.epoch), .train_loss = stats.train_loss,
                       .seconds = stats.seconds, .peak_activation_bytes = stats.peak_activation_bytes,
                       .optimizer_steps = stats.optimizer_steps};
    for (const auto& [name, value] : stats.eval) {
      if (name == "eval_loss") result.test_loss = value;
      if (name == "eval_accuracy") result.test_accuracy = value;
      if (name == "eval_f1") result.test_f1 = value;
    }
    const comm::CommStats& traffic = running->accelerator().communicator().stats();
    result.allreduce_calls = traffic.allreduce_calls;
    result.allreduce_bytes = traffic.allreduce_bytes;
    result.comm_seconds = traffic.seconds;
    result.ranks = running->accelerator().num_processes();
    results.push_back(result);
    if (on_epoch) on_epoch(result);
  };
  if (on_step) callbacks.on_step_end = on_step;
  Trainer trainer(model, args, train_set, &test_set, classification_metrics, classifier_forward(), callbacks);
  running = &trainer;
  check_ranks_agree(trainer.accelerator().host_communicator(), shared_settings(options), "train");
  trainer.train();
  return results;
}

}  // namespace remat::tasks
