// TrainingArguments: what a Trainer is told, with Hugging Face's names,
// defaults and meanings where they exist (transformers 4.40), read from a
// JSON file and from --flag forms of the same names.
//
//   TrainingArguments args{.output_dir = "results", .gradient_accumulation_steps = 4,
//                          .gradient_checkpointing = true};
//   args.eval_strategy = "epoch";
//   apply_flags(args, {"--learning_rate", "3e-4", "--save_total_limit=2"});
//   check(args);   // every value in range, every name known
//
// Where remat differs: an empty output_dir writes nothing (Hugging Face
// requires one); `device` and DiLoCo's options are remat's; max_time (in
// seconds) stops training at the next optimizer step, and has no default.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/averaging.h"
#include "scheduler/plan.h"

namespace remat::train {

// gradient_checkpointing_kwargs: how the model checkpoints its activations
// (scheduler/plan.h): a policy (a preset too: "every-n-blocks:2"), a byte
// budget for the policies that take one ("64MiB" or a number of bytes in
// JSON), rules (ops or node-name globs, scheduler/rules.h) every plan
// obeys or prefers, and how the first step is planned ("rehearse", or
// "profile": Note [The first step] in scheduler/checkpointer.h).
struct GradientCheckpointingKwargs {
  std::string policy = "cost";
  std::optional<int64_t> budget;
  std::vector<std::string> must_keep, must_recompute, prefer_keep, prefer_recompute;
  std::string first_step = "rehearse";
  // The rules as the scheduler takes them.
  scheduler::Overrides overrides() const { return {must_keep, must_recompute, prefer_keep, prefer_recompute}; }
  // The list of rules under a JSON key ("must_keep", ...), or null.
  std::vector<std::string>* rules(std::string_view key) {
    if (key == "must_keep") return &must_keep;
    if (key == "must_recompute") return &must_recompute;
    if (key == "prefer_keep") return &prefer_keep;
    if (key == "prefer_recompute") return &prefer_recompute;
    return nullptr;
  }
};

// lr_scheduler_kwargs: cosine_with_min_lr's floor, as a fraction of the
// peak learning rate ({"min_lr_rate": 0.1}).
struct LrSchedulerKwargs {
  std::optional<double> min_lr_rate;
};

struct TrainingArguments {
  std::string output_dir;  // checkpoint-STEP/ folders and trainer_state.json; empty: nothing written
  bool overwrite_output_dir = false;
  double num_train_epochs = 3;
  int64_t max_steps = -1;  // > 0: optimizer steps, overriding num_train_epochs
  // More than the training set's rows (a rank's part of them) is an error
  // naming both, before any step (Hugging Face would train every step on the
  // same rows); auto_find_batch_size starts from the rows there are.
  int64_t per_device_train_batch_size = 8;
  // With memory_limit: before training, the largest per-device batch, from
  // per_device_train_batch_size halving down to 1 (as Hugging Face's
  // find_executable_batch_size tries after each out-of-memory error), whose
  // step, rehearsed on the meta device under the checkpointing policy,
  // fits the limit; logged with the reason, and checked on the first real
  // step (Trainer::find_batch_size). Hugging Face's name; remat plans
  // instead of running out of memory, so it needs the limit.
  bool auto_find_batch_size = false;
  // The bytes a training step may hold on its device at its peak: the
  // parameters, their gradients, AdamW's state, the batch, activations and
  // temporaries ("256MiB" or a number of bytes). remat's; unset: no limit.
  // Without auto_find_batch_size the batch given is checked the same way
  // (an error before training if its step would not fit). Either way a
  // policy that takes a budget and was given none plans within what the
  // limit leaves for activations.
  std::optional<int64_t> memory_limit;
  int64_t per_device_eval_batch_size = 8;
  double learning_rate = 5e-5;
  double weight_decay = 0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double max_grad_norm = 1;  // 0: no clipping
  // linear, cosine, cosine_with_min_lr (needs lr_scheduler_kwargs' min_lr_rate), constant, constant_with_warmup
  std::string lr_scheduler_type = "linear";
  LrSchedulerKwargs lr_scheduler_kwargs;
  int64_t warmup_steps = 0;
  double warmup_ratio = 0;  // of the total steps, where warmup_steps is 0
  std::string eval_strategy = "no";  // no, steps, epoch ("evaluation_strategy" is read as this)
  std::optional<int64_t> eval_steps;  // with eval_strategy steps; unset: logging_steps
  int64_t logging_steps = 500;
  std::string save_strategy = "steps";  // no, steps, epoch
  int64_t save_steps = 500;
  std::optional<int64_t> save_total_limit;  // checkpoints kept (the best one too, with load_best_model_at_end)
  bool load_best_model_at_end = false;
  std::string metric_for_best_model = "loss";  // an eval metric, with or without "eval_"
  std::optional<bool> greater_is_better;       // unset: false for loss, true for any other metric
  int64_t gradient_accumulation_steps = 1;
  bool gradient_checkpointing = false;
  GradientCheckpointingKwargs gradient_checkpointing_kwargs;
  int64_t local_sgd_steps = 0;  // under mpirun: optimizer steps between averages (0: data parallel)
  bool diloco = false;          // with local_sgd_steps: DiLoCo's outer Nesterov step
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  uint64_t seed = 42;
  // A checkpoint folder, or "latest" (the newest checkpoint-STEP in
  // output_dir that verifies); empty: start from the beginning.
  std::string resume_from_checkpoint;
  std::optional<double> max_time;  // seconds; unset: no limit
  std::string device = "cpu";
  // TF32 tensor-core math for float32 matrix products on the GPU (cuBLAS's
  // CUBLAS_TF32_TENSOR_OP_MATH; kernels/cuda/gemm.h). Unset: the process's
  // setting is left as it is (off unless set), as Hugging Face's None; no
  // effect on the CPU.
  std::optional<bool> tf32;
  // cuBLASLt epilogues for linear layers on the GPU: the bias added in the
  // forward GEMM, the bias gradient taken in the weight gradient's GEMM
  // (kernels/cuda/gemm.h, Note [Fused epilogues]); float rounding apart
  // from the unfused kernels. Unset: the process's setting is left as it is
  // (off unless set); no effect on the CPU.
  std::optional<bool> fused_epilogues;
};

// gradient_accumulation_steps, local_sgd_steps and DiLoCo's options (unset:
// off), as a task's own flags give them.
void set_distribution(TrainingArguments& args, int64_t gradient_accumulation_steps, int64_t local_sgd_steps,
                      const std::optional<comm::DiLoCoOptions>& diloco);

// Whether `flags` (as apply_flags takes them) name the argument `name`,
// in any spelling apply_flags accepts.
bool names_training_argument(const std::vector<std::string>& flags, std::string_view name);

// The field a name stands for: dashes read as underscores, and Hugging
// Face's older evaluation_strategy as eval_strategy.
std::string training_argument_name(std::string_view name);

// The names every reader accepts, in declaration order.
const std::vector<std::string_view>& training_argument_names();

// Sets the fields named in a JSON object (unknown names and values of the
// wrong type or range are errors naming them and `source`).
void apply_json(TrainingArguments& args, const nlohmann::json& object, std::string_view source);
// The same from a JSON file.
TrainingArguments load_training_arguments(const std::string& path);

// Sets fields from "--name value", "--name=value" and, for a flag of type
// bool, a bare "--name"; dashes and underscores in a name are the same
// ("--per-device-train-batch-size"). Errors name the flag and the value,
// and one argument given two values, in one spelling or two
// (--max-steps 4 --max_steps 6), is an error naming both flags (Note [One
// value per setting] in training_arguments.cpp); the same value twice is not.
void apply_flags(TrainingArguments& args, const std::vector<std::string>& flags);
// The last of `flags` that gives argument `name`, as written ("--learning-rate
// 1e-3"), or none.
std::optional<std::string> flag_giving(const std::vector<std::string>& flags, std::string_view name);

// A task's own flag that gives a training argument: kjv-gpt's --lr gives
// learning_rate. A task lists its flags in one table of these
// (tasks/kjv_gpt_task.h, tasks/fashion_mnist_task.h), which both builds the
// arguments it trains with (set) and, for the flags the user gave, finds a
// trainer flag that gives the same argument another value (check_task_flags):
// `--lr 3e-3 --learning-rate 1e-3` is an error naming both, not a run at one
// value under a header showing the other.
template <class Options>
struct TaskFlag {
  std::string_view flag;      // the task's, "--lr"
  std::string_view argument;  // the TrainingArguments field it gives, "learning_rate"
  void (*set)(TrainingArguments& args, const Options& options);
};

// The rows every task shares (its Options has lr, weight_decay, seed,
// device and the distribution's fields under the same names), after the
// rows of the task's own flags.
template <class Options>
std::vector<TaskFlag<Options>> with_shared_task_flags(std::vector<TaskFlag<Options>> rows) {
  using Args = TrainingArguments;
  const std::vector<TaskFlag<Options>> shared{
      {"--lr", "learning_rate", [](Args& a, const Options& o) { a.learning_rate = o.lr; }},
      {"--weight-decay", "weight_decay", [](Args& a, const Options& o) { a.weight_decay = o.weight_decay; }},
      {"--gradient-accumulation-steps", "gradient_accumulation_steps",
       [](Args& a, const Options& o) { a.gradient_accumulation_steps = o.gradient_accumulation_steps; }},
      {"--local-sgd-steps", "local_sgd_steps", [](Args& a, const Options& o) { a.local_sgd_steps = o.local_sgd_steps; }},
      {"--diloco", "diloco", [](Args& a, const Options& o) { a.diloco = o.diloco.has_value(); }},
      {"--outer-lr", "outer_lr", [](Args& a, const Options& o) { if (o.diloco) a.outer_lr = o.diloco->outer_lr; }},
      {"--outer-momentum", "outer_momentum",
       [](Args& a, const Options& o) { if (o.diloco) a.outer_momentum = o.diloco->momentum; }},
      {"--seed", "seed", [](Args& a, const Options& o) { a.seed = o.seed; }},
      {"--device", "device", [](Args& a, const Options& o) { a.device = o.device; }},
  };
  rows.insert(rows.end(), shared.begin(), shared.end());
  return rows;
}

// An error where the task's flag `task_flag` (its value in task_args) and a
// trainer flag of trainer_flags give argument `name` two values.
void check_one_value(const TrainingArguments& task_args, std::string_view task_flag, std::string_view name,
                     const std::vector<std::string>& trainer_flags);

// args with every row of `table` set from `options`.
template <class Options>
TrainingArguments with_task_flags(TrainingArguments args, const std::vector<TaskFlag<Options>>& table,
                                  const Options& options) {
  for (const TaskFlag<Options>& row : table) row.set(args, options);
  return args;
}

// check_one_value for each row of `table` whose flag is among `given` (the
// task flags the user gave).
template <class Options>
void check_task_flags(const std::vector<TaskFlag<Options>>& table, const Options& options,
                      const std::vector<std::string>& given, const std::vector<std::string>& trainer_flags) {
  const TrainingArguments task_args = with_task_flags(TrainingArguments{}, table, options);
  for (const TaskFlag<Options>& row : table) {
    if (std::find(given.begin(), given.end(), row.flag) == given.end()) continue;
    check_one_value(task_args, row.flag, row.argument, trainer_flags);
  }
}

// How a run of `args` is spread, for a task's header: "4 ranks (mpi),
// LocalSGD every 8 steps, 2 micro-batches per step", or "1 process".
std::string describe_distribution(const TrainingArguments& args);
// One field from text, as a flag gives it.
void set_training_argument(TrainingArguments& args, std::string_view name, std::string_view value);
bool is_training_argument(std::string_view name);
bool is_bool_training_argument(std::string_view name);

nlohmann::ordered_json to_json(const TrainingArguments& args);

// Every value in its range and every choice one of its names; an error
// names the argument and the value.
void check(const TrainingArguments& args);

}  // namespace remat::train
