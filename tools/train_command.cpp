// remat train: train a model on a task (fashion-mnist's MLP, kjv-gpt's GPT,
// kjv-llama's Llama)
// with the Trainer, printing a header, a progress bar and a line or table
// row per epoch or validation (JSON lines with --json). Flags CLI11 does not
// know go to the Trainer by Hugging Face's names (train/training_arguments.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "comm/mpi.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "kernels/cpu/gemm_library.h"
#include "kernels/cpu/parallel.h"
#include "tools/command.h"
#include "tasks/fashion_mnist_task.h"
#include "tasks/kjv_gpt_task.h"
#include "tasks/task_printing.h"
#include "workloads/workload_build.h"
#include "train/parse.h"
#include "train/progress.h"
#include "train/trainer.h"
#include "train/training_arguments.h"

namespace remat::tools {
namespace {

// Flags that several tasks take; each task keeps its own default for a flag
// that is not given.
struct CommonFlags {
  std::optional<int64_t> batch_size;
  std::optional<double> lr, weight_decay;
  std::string seed;  // parse_seed: CLI11 took "-1" for 2^64 - 1
  std::optional<int> threads;
  std::string device = "cpu";
  int64_t gradient_accumulation_steps = 1;
  int64_t local_sgd_steps = 0;
  bool diloco = false;
  comm::DiLoCoOptions outer;
};

template <class Options>
void apply(const CommonFlags& flags, Options& options) {
  if (flags.batch_size) options.batch_size = *flags.batch_size;
  if (flags.lr) options.lr = *flags.lr;
  if (flags.weight_decay) options.weight_decay = *flags.weight_decay;
  if (!flags.seed.empty()) options.seed = parse_seed(flags.seed, "train --seed");
  if (flags.threads) options.threads = *flags.threads;
  options.device = flags.device;
  options.gradient_accumulation_steps = flags.gradient_accumulation_steps;
  options.local_sgd_steps = flags.local_sgd_steps;
  if (flags.diloco) options.diloco = flags.outer;
}

// train --model / --hf: which task, and its model's flags.
struct TrainModelFlags {
  std::string model, hf, head = "tied";
  std::vector<int64_t> dims;
  CLI::Option *model_flag = nullptr, *hf_flag = nullptr, *dims_flag = nullptr, *head_flag = nullptr;
};

void resolve_train_model(std::string& task, const TrainModelFlags& f, tasks::FashionMnistOptions& mnist,
                         tasks::KjvGptOptions& kjv) {
  const bool model_given = f.model_flag->count() > 0, hf_given = f.hf_flag->count() > 0;
  const bool dims_given = f.dims_flag->count() > 0, head_given = f.head_flag->count() > 0;
  REMAT_CHECK(!(model_given && hf_given), "train: give --model or --hf, not both");
  std::string implied;
  if (f.model == "mlp") implied = "fashion-mnist";
  if (f.model == "gpt") implied = "kjv-gpt";
  if (f.model == "llama") implied = "kjv-llama";
  if (hf_given) implied = workloads::hf_model_type(f.hf) == "llama" ? "kjv-llama" : "kjv-gpt";
  if (!implied.empty()) {
    const std::string given = hf_given ? "--hf" : "--model " + f.model;
    REMAT_CHECK(task.empty() || task == implied, "train: {} trains task {}, not --task {}", given, implied, task);
    task = implied;
  }
  REMAT_CHECK(!task.empty(), "train: give --task fashion-mnist|kjv-gpt|kjv-llama, --model gpt|llama|mlp, or --hf "
              "DIR");
  REMAT_CHECK(!dims_given || task == "fashion-mnist", "train: --dims is a flag of --model mlp (task "
              "fashion-mnist), not of task {}", task);
  REMAT_CHECK(!head_given || task == "kjv-gpt" || task == "kjv-llama", "train: --head is a flag of --model gpt or "
              "llama (tasks kjv-gpt, kjv-llama), not of task {}", task);
  if (hf_given) {
    REMAT_CHECK(kjv.init_from.empty(), "train: --hf and --init-from name the same thing; give one");
    kjv.init_from = f.hf;
  }
  kjv.tie_weights = f.head == "tied";
  if (task == "kjv-llama") kjv.model = "llama";
  if (dims_given) {
    REMAT_CHECK(f.dims.size() >= 2 && f.dims.front() == 784 && f.dims.back() == 10, "train --model mlp: --dims {} "
                "must run from 784 (fashion-mnist's pixels) to 10 (its classes), e.g. 784,1024,1024,10",
                fmt::join(f.dims, ","));
    mnist.hidden.assign(f.dims.begin() + 1, f.dims.end() - 1);
  }
}

class TrainCommand : public Command {
 public:
  void add(CLI::App& app) override {
    train_ = app.add_subcommand("train", "train a model on a task; other --flags are Trainer arguments by Hugging "
                                "Face's names (train/training_arguments.h), e.g. --eval-strategy epoch "
                                "--gradient-checkpointing --output-dir results");
    train_->allow_extras();
    train_->add_flag("--tf32", tf32_, kTf32Help);
    train_->add_flag("--fused-epilogues", fused_epilogues_, kFusedEpiloguesHelp);
    train_->add_option("--task", task_, "fashion-mnist, kjv-gpt or kjv-llama (or give --model or --hf)")
        ->check(CLI::IsMember({"fashion-mnist", "kjv-gpt", "kjv-llama"}));
    add_model_flags();
    add_common_flags();
    add_fashion_mnist_flags();
    add_kjv_gpt_flags();
    train_->add_flag("--json", json_, "print JSON lines");
  }

  // A flag of the other task would be silently ignored: say so instead.
  // kjv-gpt's flags that are Trainer arguments too (--max-steps,
  // --warmup-steps) go to fashion-mnist's Trainer.
  void run() override {
    resolve_train_model(task_, model_, mnist_, kjv_);
    std::vector<std::string> trainer_flags = other_task_flags();
    // What CLI11 does not know goes to the Trainer, by Hugging Face's names
    // (--eval-strategy epoch, --gradient-checkpointing, --output-dir DIR).
    for (const std::string& flag : train_->remaining()) trainer_flags.push_back(flag);
    if (tf32_) trainer_flags.push_back("--tf32");  // TrainingArguments' tf32
    if (fused_epilogues_) trainer_flags.push_back("--fused-epilogues");  // and fused_epilogues
    if (task_ == "fashion-mnist") {
      apply(common_, mnist_);
      mnist_.trainer_flags = trainer_flags;
      mnist_.flags_given = flags_given(tasks::task_flags(mnist_));
      tasks::run_fashion_mnist(mnist_, json_);
    }
    if (task_ == "kjv-gpt" || task_ == "kjv-llama") {
      if (!kjv_.init_from.empty()) {
        for (const char* flag : {"--n-layer", "--n-head", "--n-embd", "--block-size", "--dropout", "--head",
                                 "--n-kv-head", "--intermediate-size", "--rope-theta"}) {
          REMAT_CHECK(train_->get_option(flag)->count() == 0, "train: {} and --init-from: the model's configuration "
                      "is the folder's ({}/config.json); leave {} out", flag, kjv_.init_from, flag);
        }
      }
      apply(common_, kjv_);
      kjv_.trainer_flags = trainer_flags;
      kjv_.flags_given = flags_given(tasks::task_flags(kjv_));
      if (!kjv_budget_.empty()) kjv_.checkpointing_budget = train::parse_bytes(kjv_budget_, "--checkpointing-budget");
      tasks::run_kjv_gpt(kjv_, json_);
    }
  }

 private:
  // A model of the user's: --model mlp is fashion-mnist's MLP of those widths,
  // --model gpt (with kjv-gpt's sizes) and --hf DIR are kjv-gpt's GPT.
  void add_model_flags() {
    model_.model_flag = train_->add_option("--model", model_.model, "gpt (task kjv-gpt, sized by --n-layer ...), "
                                           "llama (task kjv-llama) or mlp (task fashion-mnist, sized by --dims)")
                            ->check(CLI::IsMember({"gpt", "llama", "mlp"}));
    model_.hf_flag = train_->add_option("--hf", model_.hf, "task kjv-gpt or kjv-llama from a Hugging Face GPT-2 or "
                                        "Llama folder (the same as --init-from DIR)");
    model_.dims_flag = train_->add_option("--dims", model_.dims, "--model mlp: widths, 784 (the pixels) to 10 "
                                          "(the classes), e.g. 784,1024,1024,10 (784,256,256,10)")
                           ->delimiter(',');
    model_.head_flag = train_->add_option("--head", model_.head, "--model gpt: tied or untied lm_head "
                                          "(tied, as GPT-2; bench's --model gpt is untied, as W2)")
                           ->check(CLI::IsMember({"tied", "untied"}))->capture_default_str();
  }

  void add_common_flags() {
    train_->add_option("--batch-size", common_.batch_size, "examples per step (fashion-mnist 64, kjv-gpt 32)");
    train_->add_option("--lr", common_.lr, "AdamW peak learning rate (fashion-mnist 2e-3, kjv-gpt 3e-3)");
    train_->add_option("--weight-decay", common_.weight_decay, "AdamW decoupled weight decay (1e-2, 0.1)");
    train_->add_option("--seed", common_.seed, "seed of initialisation, shuffling and sampling (0)");
    train_->add_option("--threads", common_.threads, "CPU threads per process (2)");
    train_->add_option("--device", common_.device, "cpu, or cuda[:N] (under mpirun: each rank its local GPU, NCCL; "
                       "the CUDA kernels have not yet run on a GPU)")->capture_default_str();
    train_->add_option("--gradient-accumulation-steps", common_.gradient_accumulation_steps,
                       "micro-batches per optimizer step")->capture_default_str();
    train_->add_option("--local-sgd-steps", common_.local_sgd_steps,
                       "under mpirun: optimizer steps between parameter averages (0: synchronous data parallel)")
        ->capture_default_str();
    train_->add_flag("--diloco", common_.diloco, "with --local-sgd-steps: DiLoCo's outer Nesterov step at each average");
    CLI::Option* diloco = train_->get_option("--diloco");
    train_->add_option("--outer-lr", common_.outer.outer_lr, "DiLoCo's outer learning rate")->capture_default_str()
        ->needs(diloco);
    train_->add_option("--outer-momentum", common_.outer.momentum, "DiLoCo's outer momentum")->capture_default_str()
        ->needs(diloco);
  }

  void add_fashion_mnist_flags() {
    mnist_only_.push_back(train_->add_option("--epochs", mnist_.epochs, "fashion-mnist: epochs")->capture_default_str());
    mnist_only_.push_back(train_->add_option("--data-dir", mnist_.data_dir, "fashion-mnist: folder of the IDX .gz files")
                              ->capture_default_str());
    mnist_only_.push_back(train_->add_option("--max-batches", mnist_.max_batches,
                                             "fashion-mnist: stop each epoch after N batches (0: all)"));
  }

  // Appends a kjv-gpt flag with kjv_.field's default shown.
  template <class T>
  void kjv_flag(const char* name, T& field, const char* help) {
    kjv_only_.push_back(train_->add_option(name, field, help)->capture_default_str());
  }

  void add_kjv_gpt_flags() {
    kjv_flag("--max-steps", kjv_.max_steps, "kjv-gpt: optimizer steps");
    kjv_flag("--time-limit", kjv_.time_limit_seconds, "kjv-gpt: stop after this many seconds (0: none)");
    kjv_flag("--n-layer", kjv_.n_layer, "kjv-gpt: blocks");
    kjv_flag("--n-head", kjv_.n_head, "kjv-gpt: attention heads");
    kjv_flag("--n-embd", kjv_.n_embd, "kjv-gpt: channels");
    kjv_flag("--block-size", kjv_.block_size, "kjv-gpt: context length");
    kjv_flag("--dropout", kjv_.dropout, "kjv-gpt: dropout probability");
    llama_only_ = {train_->add_option("--n-kv-head", kjv_.n_kv_head, "kjv-llama: key/value heads, dividing "
                                      "--n-head")->capture_default_str(),
                   train_->add_option("--intermediate-size", kjv_.intermediate_size, "kjv-llama: the MLP's width")
                       ->capture_default_str(),
                   train_->add_option("--rope-theta", kjv_.rope_theta, "kjv-llama: RoPE's base")
                       ->capture_default_str()};
    kjv_only_.insert(kjv_only_.end(), llama_only_.begin(), llama_only_.end());
    kjv_only_.push_back(train_->add_option("--attention", kjv_.attention, "kjv-gpt: fused (the fused op) or "
                                           "explicit (q k^T, causal softmax, product; also whenever --dropout > 0)")
                            ->check(CLI::IsMember({"fused", "explicit"}))->capture_default_str());
    kjv_only_.push_back(train_->add_option("--checkpointing", kjv_.checkpointing, "kjv-gpt: activation "
                                           "checkpointing policy (blocks, sqrt, cost, chain, milp, auto, dtr)"));
    kjv_only_.push_back(train_->add_option("--checkpointing-budget", kjv_budget_, "kjv-gpt: peak activation bytes "
                                           "for cost, chain, milp, auto or dtr, e.g. 32MiB"));
    kjv_only_.push_back(train_->add_option("--checkpointing-profile", kjv_.checkpointing_profile, "kjv-gpt: plan "
                                           "the first step from this saved profile (the budget holds from it)"));
    kjv_only_.push_back(train_->add_option("--save-checkpointing-profile", kjv_.save_checkpointing_profile,
                                           "kjv-gpt: write the graph's profile here at the end, for "
                                           "--checkpointing-profile"));
    kjv_flag("--warmup-steps", kjv_.warmup_steps, "kjv-gpt: linear warm-up steps");
    kjv_flag("--eval-interval", kjv_.eval_interval, "kjv-gpt: steps between validation losses");
    kjv_flag("--eval-batches", kjv_.eval_batches, "kjv-gpt: validation batches per measurement");
    kjv_flag("--sample-chars", kjv_.sample_chars, "kjv-gpt: characters to generate at the end");
    kjv_flag("--temperature", kjv_.temperature, "kjv-gpt: sampling temperature");
    kjv_flag("--prompt", kjv_.prompt, "kjv-gpt: text the sample starts from");
    kjv_only_.push_back(train_->add_option("--text", kjv_.text_path, "kjv-gpt: train on this text file instead of "
                                           "the KJV"));
    kjv_only_.push_back(train_->add_option("--save-weights", kjv_.weights_path, "kjv-gpt: write the trained model "
                                           "here as a Hugging Face GPT-2 folder (config.json, model.safetensors)"));
    kjv_only_.push_back(train_->add_option("--init-from", kjv_.init_from, "kjv-gpt: start from the weights of a "
                                           "Hugging Face GPT-2 folder (its configuration replaces the model flags)"));
  }

  // Which of a task's flags that give training arguments the user gave:
  // a trainer flag may not give one of them another value (Note [One value
  // per setting] in train/training_arguments.cpp).
  template <class Options>
  std::vector<std::string> flags_given(const std::vector<train::TaskFlag<Options>>& table) const {
    std::vector<std::string> given;
    for (const train::TaskFlag<Options>& row : table) {
      if (train_->get_option(std::string(row.flag))->count() > 0) given.emplace_back(row.flag);
    }
    return given;
  }

  // The flags of the task not run: an error, or for fashion-mnist the
  // Trainer arguments among kjv-gpt's flags, as "--name value" pairs.
  std::vector<std::string> other_task_flags() const {
    std::vector<std::string> trainer_flags;
    for (const CLI::Option* flag : llama_only_) {
      REMAT_CHECK(flag->count() == 0 || task_ != "kjv-gpt", "train: {} is a flag of --task kjv-llama, not of --task "
                  "kjv-gpt", flag->get_name());
    }
    const bool kjv = task_ == "kjv-gpt" || task_ == "kjv-llama";  // one set of flags (the kjv task's)
    for (const auto& [owner, flags] : {std::pair{"kjv-gpt", &kjv_only_}, std::pair{"fashion-mnist", &mnist_only_}}) {
      if (task_ == owner || (kjv && std::string_view(owner) == "kjv-gpt")) continue;
      for (const CLI::Option* flag : *flags) {
        if (flag->count() == 0) continue;
        const std::string name = flag->get_name();
        REMAT_CHECK(task_ == "fashion-mnist" && train::is_training_argument(name.substr(2)), "train: {} is a "
                    "flag of --task {}, not of --task {}", name, owner, task_);
        for (const std::string& value : flag->results()) trainer_flags.insert(trainer_flags.end(), {name, value});
      }
    }
    return trainer_flags;
  }

  CLI::App* train_ = nullptr;
  std::string task_;
  TrainModelFlags model_;
  CommonFlags common_;
  tasks::FashionMnistOptions mnist_;
  tasks::KjvGptOptions kjv_;
  std::string kjv_budget_;
  std::vector<CLI::Option*> mnist_only_, kjv_only_, llama_only_;
  bool tf32_ = false;
  bool fused_epilogues_ = false;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> make_train_command() { return std::make_unique<TrainCommand>(); }

}  // namespace remat::tools
