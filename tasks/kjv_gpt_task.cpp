// The kjv-gpt task; see kjv_gpt_task.h.
#include "tasks/kjv_gpt_task.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/mpi.h"
#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/factory.h"
#include "kernels/cpu/parallel.h"
#include "ops/ops.h"
#include "nn/gpt.h"
#include "nn/gpt2_pretrained.h"
#include "nn/generate.h"
#include "nn/llama.h"
#include "nn/llama_pretrained.h"
#include "nn/safetensors.h"
#include "scheduler/plan.h"
#include "scheduler/profile_json.h"
#include "train/accelerator.h"
#include "data/data_loader.h"
#include "train/limits.h"
#include "train/rank_agreement.h"
#include "train/run_files.h"
#include "data/text_data.h"
#include "train/training_arguments.h"

namespace remat::tasks {

using namespace remat::train;  // the Trainer, its arguments and its checks

namespace {

using Args = TrainingArguments;
using Options = KjvGptOptions;

}  // namespace

const std::vector<TaskFlag<KjvGptOptions>>& task_flags(const KjvGptOptions&) {
  static const std::vector<TaskFlag<Options>> table = with_shared_task_flags<Options>({
      {"--max-steps", "max_steps", [](Args& a, const Options& o) { a.max_steps = o.max_steps; }},
      {"--batch-size", "per_device_train_batch_size",
       [](Args& a, const Options& o) { a.per_device_train_batch_size = a.per_device_eval_batch_size = o.batch_size; }},
      {"--warmup-steps", "warmup_steps", [](Args& a, const Options& o) { a.warmup_steps = o.warmup_steps; }},
      // Evaluation, logging and saving every eval_interval steps.
      {"--eval-interval", "eval_steps",
       [](Args& a, const Options& o) { a.eval_steps = a.logging_steps = a.save_steps = o.eval_interval; }},
      {"--time-limit", "max_time",
       [](Args& a, const Options& o) { if (o.time_limit_seconds > 0) a.max_time = o.time_limit_seconds; }},
      {"--checkpointing", "gradient_checkpointing_kwargs",
       [](Args& a, const Options& o) {
         if (o.checkpointing.empty()) return;
         a.gradient_checkpointing = true;
         a.gradient_checkpointing_kwargs.policy = o.checkpointing;
         a.gradient_checkpointing_kwargs.budget = o.checkpointing_budget;
       }},
  });
  return table;
}

TrainingArguments trainer_arguments(const KjvGptOptions& o) {
  // The task's own choices, which no flag of its gives.
  TrainingArguments defaults;
  defaults.adam_beta2 = 0.95;
  defaults.max_grad_norm = o.grad_clip;
  defaults.lr_scheduler_type = "cosine_with_min_lr";
  defaults.lr_scheduler_kwargs.min_lr_rate = o.min_lr_ratio;
  defaults.eval_strategy = "steps";
  defaults.save_strategy = "steps";  // where an output_dir is given
  TrainingArguments args = with_task_flags(defaults, task_flags(o), o);
  apply_flags(args, o.trainer_flags);
  // The floor is the task's cosine's: another schedule named by a flag is
  // Hugging Face's, without it (unless the flags give one too).
  if (args.lr_scheduler_type != "cosine_with_min_lr" && !names_training_argument(o.trainer_flags, "lr_scheduler_kwargs")) {
    args.lr_scheduler_kwargs = {};
  }
  // A warm-up ratio named by a flag replaces the task's default warm-up
  // steps (given ones win, as Hugging Face's warmup_steps over warmup_ratio).
  const bool steps_given = names_training_argument(o.trainer_flags, "warmup_steps") ||
                           std::ranges::find(o.flags_given, "--warmup-steps") != o.flags_given.end();
  if (names_training_argument(o.trainer_flags, "warmup_ratio") && !steps_given) args.warmup_steps = 0;
  return args;
}

std::string task_name(const KjvGptOptions& options) { return "kjv-" + options.model; }

std::string run_header(const KjvGptOptions& o, const TrainingArguments& args) {
  const bool llama = o.model == "llama";
  const std::string sizes =
      llama ? fmt::format("Llama {} layers x {} channels, {} heads, {} kv heads, MLP {}, context {}", o.n_layer,
                          o.n_embd, o.n_head, o.n_kv_head, o.intermediate_size, o.block_size)
            : fmt::format("GPT {} layers x {} channels, {} heads, context {}", o.n_layer, o.n_embd, o.n_head,
                          o.block_size);
  const std::string model = o.init_from.empty()
                                ? fmt::format("{}, {} head", sizes, o.tie_weights ? "tied" : "untied")
                                : fmt::format("{} of {}/config.json", llama ? "Llama" : "GPT", o.init_from);
  return fmt::format("task {}: {}, batch {} per rank, AdamW lr {}, {}{}, {} threads; {}", task_name(o), model,
                     args.per_device_train_batch_size, args.learning_rate,
                     args.max_steps > 0 ? fmt::format("{} steps", args.max_steps)
                                        : fmt::format("{} epochs", args.num_train_epochs),
                     args.max_time ? fmt::format(" or {} s", *args.max_time) : std::string(), o.threads,
                     describe_distribution(args));
}

namespace {

// `count` rows of `blocks` spread evenly over it (all when it has fewer):
// the validation set, the same every measurement.
data::Dataset spread_rows(const data::Dataset& blocks, int64_t count) {
  if (count >= blocks.size()) return blocks;
  std::vector<int64_t> rows(static_cast<size_t>(count));
  for (int64_t j = 0; j < count; ++j) rows[static_cast<size_t>(j)] = j * blocks.size() / count;
  return data::select_rows(blocks, rows);
}

// What must be the same on every rank: everything that shapes the model, the
// data, the schedule and the collectives.
std::vector<Setting> shared_settings(const KjvGptOptions& o, uint64_t text_fingerprint) {
  const auto text = [](auto value) { return fmt::format("{}", value); };
  std::vector<Setting> settings{
          {"--n-layer", text(o.n_layer)}, {"--n-head", text(o.n_head)}, {"--n-embd", text(o.n_embd)},
          {"--block-size", text(o.block_size)}, {"--dropout", text(o.dropout)},
          {"--head", o.tie_weights ? "tied" : "untied"}, {"--attention", o.attention},
          {"--batch-size", text(o.batch_size)}, {"--max-steps", text(o.max_steps)},
          {"--time-limit", text(o.time_limit_seconds)}, {"--lr", text(o.lr)}, {"min_lr_ratio", text(o.min_lr_ratio)},
          {"--warmup-steps", text(o.warmup_steps)}, {"--weight-decay", text(o.weight_decay)},
          {"grad_clip", text(o.grad_clip)}, {"--eval-interval", text(o.eval_interval)},
          {"--eval-batches", text(o.eval_batches)}, {"--seed", text(o.seed)},
          {"--gradient-accumulation-steps", text(o.gradient_accumulation_steps)},
          {"--local-sgd-steps", text(o.local_sgd_steps)},
          {"--diloco", o.diloco ? fmt::format("outer lr {}, momentum {}", o.diloco->outer_lr, o.diloco->momentum)
                                : std::string("off")},
          {"trainer arguments", fmt::format("{}", fmt::join(o.trainer_flags, " "))},
          {"--init-from", o.init_from},
          {"--text (a fingerprint of its bytes)", fmt::format("{:016x}", text_fingerprint)}};
  if (o.model == "llama") {
    settings.insert(settings.end(), {{"--task", task_name(o)}, {"--n-kv-head", text(o.n_kv_head)},
                                     {"--intermediate-size", text(o.intermediate_size)},
                                     {"--rope-theta", text(o.rope_theta)}});
  }
  return settings;
}

// What a checkpoint records about its run, and a resume must match.
nn::SafetensorsMetadata describe_run(const nn::LlamaConfig& o, const data::CharTokenizer& tokenizer,
                                     uint64_t text_fingerprint) {
  return {{"task", "kjv-llama"}, {"n_layer", std::to_string(o.num_hidden_layers)},
          {"n_head", std::to_string(o.num_attention_heads)}, {"n_kv_head", std::to_string(o.kv_heads())},
          {"n_embd", std::to_string(o.hidden_size)}, {"intermediate_size", std::to_string(o.intermediate_size)},
          {"block_size", std::to_string(o.max_position_embeddings)}, {"rope_theta", fmt::format("{}", o.rope_theta)},
          {"rms_norm_eps", fmt::format("{}", o.rms_norm_eps)}, {"tied_head", o.tie_word_embeddings ? "true" : "false"},
          {"vocab_size", std::to_string(tokenizer.vocab_size())},
          {"symbols", tokenizer.symbols()}, {"data_fingerprint", fmt::format("{:016x}", text_fingerprint)}};
}

nn::SafetensorsMetadata describe_run(const nn::GPTConfig& o, const data::CharTokenizer& tokenizer,
                                     uint64_t text_fingerprint) {
  return {{"task", "kjv-gpt"}, {"n_layer", std::to_string(o.n_layer)}, {"n_head", std::to_string(o.n_head)},
          {"n_embd", std::to_string(o.n_embd)}, {"block_size", std::to_string(o.block_size)},
          {"dropout", fmt::format("{}", o.dropout)}, {"tied_head", o.tie_weights ? "true" : "false"},
          {"vocab_size", std::to_string(tokenizer.vocab_size())},
          {"symbols", tokenizer.symbols()}, {"data_fingerprint", fmt::format("{:016x}", text_fingerprint)}};
}

}  // namespace

// Every option, before anything runs: a bad value found when training ends
// (a --temperature of 0 at sampling time) would lose the trained model.
void check_options(const KjvGptOptions& o) {
  check_task_flags(task_flags(o), o, o.flags_given, o.trainer_flags);  // one value per setting, first
  nn::parse_attention_path(o.attention);  // "fused" or "explicit", or an error naming it
  REMAT_CHECK(check_device(o.device, "train").is_cpu() || !o.diloco, "train: --diloco's outer step runs on the "
              "CPU only, not on --device {}", o.device);
  REMAT_CHECK(o.n_layer >= 1 && o.n_head >= 1 && o.n_embd >= 1 && o.block_size >= 1, "train: --n-layer, --n-head, "
              "--n-embd and --block-size must be at least 1, got {}, {}, {} and {}", o.n_layer, o.n_head, o.n_embd,
              o.block_size);
  REMAT_CHECK(o.n_embd % o.n_head == 0, "train: --n-embd {} must be a multiple of --n-head {} (each head gets "
              "n_embd / n_head channels)", o.n_embd, o.n_head);
  REMAT_CHECK(o.dropout >= 0 && o.dropout < 1, "train: --dropout must be in [0, 1), got {}", o.dropout);
  REMAT_CHECK(o.model == "gpt" || o.model == "llama", "train: the kjv task's model is gpt or llama, not '{}'", o.model);
  if (o.model == "llama") {
    REMAT_CHECK(o.dropout == 0 && o.attention == "fused", "train: task kjv-llama has no dropout and runs the fused "
                "attention only (--dropout {}, --attention {} are kjv-gpt's)", o.dropout, o.attention);
    REMAT_CHECK(o.n_kv_head >= 1 && o.n_head % o.n_kv_head == 0, "train: --n-kv-head {} must be at least 1 and "
                "divide --n-head {}", o.n_kv_head, o.n_head);
    REMAT_CHECK((o.n_embd / o.n_head) % 2 == 0, "train: the head size --n-embd / --n-head = {} / {} must be even "
                "(RoPE rotates pairs of channels)", o.n_embd, o.n_head);
    REMAT_CHECK(o.intermediate_size >= 1, "train: --intermediate-size must be at least 1, got {}",
                o.intermediate_size);
    REMAT_CHECK(std::isfinite(o.rope_theta) && o.rope_theta > 0, "train: --rope-theta must be finite and above 0, "
                "got {}", o.rope_theta);
  }
  REMAT_CHECK(!o.checkpointing.empty() || std::ranges::find(o.flags_given, "--checkpointing") == o.flags_given.end(),
              "train: --checkpointing '' names no policy; give one of {} (or leave --checkpointing out to keep every "
              "activation)", fmt::join(scheduler::policy_names(), ", "));
  if (!o.checkpointing.empty()) scheduler::check_policy(o.checkpointing);
  REMAT_CHECK(!o.checkpointing_budget || !o.checkpointing.empty(), "train: --checkpointing-budget needs "
              "--checkpointing with a policy that takes one, {} (without a policy nothing is recomputed, and the budget would be "
              "ignored; with --gradient-checkpointing the budget goes in --gradient-checkpointing-kwargs)", scheduler::budget_policies());
  REMAT_CHECK(!o.checkpointing_budget || scheduler::takes_budget(o.checkpointing),
              "train: --checkpointing {} takes no --checkpointing-budget ({} do)", o.checkpointing,
              scheduler::budget_policies());
  REMAT_CHECK(!o.checkpointing_budget || *o.checkpointing_budget > 0, "train: --checkpointing-budget must be more "
              "than 0 bytes, got {}", o.checkpointing_budget.value_or(0));
  REMAT_CHECK(o.batch_size >= 1, "train: --batch-size must be at least 1, got {}", o.batch_size);
  REMAT_CHECK(o.max_steps >= 1, "train: --max-steps must be at least 1, got {}", o.max_steps);
  REMAT_CHECK(std::isfinite(o.time_limit_seconds) && o.time_limit_seconds >= 0, "train: --time-limit must be 0 "
              "(none) or more seconds, got {}", o.time_limit_seconds);
  REMAT_CHECK(std::isfinite(o.lr) && o.lr > 0, "train: --lr must be > 0, got {}", o.lr);
  REMAT_CHECK(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1, "train: min_lr_ratio must be in [0, 1], got {}",
              o.min_lr_ratio);
  REMAT_CHECK(o.warmup_steps >= 0, "train: --warmup-steps must be >= 0, got {}", o.warmup_steps);
  REMAT_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "train: --weight-decay must be >= 0, got {}",
              o.weight_decay);
  REMAT_CHECK(std::isfinite(o.grad_clip) && o.grad_clip > 0, "train: grad_clip must be > 0, got {}", o.grad_clip);
  REMAT_CHECK(o.eval_interval >= 1, "train: --eval-interval must be at least 1, got {}", o.eval_interval);
  REMAT_CHECK(o.eval_batches >= 1, "train: --eval-batches must be at least 1, got {}", o.eval_batches);
  REMAT_CHECK(o.sample_chars >= 0, "train: --sample-chars must be >= 0, got {}", o.sample_chars);
  REMAT_CHECK(std::isfinite(o.temperature) && o.temperature > 0, "train: --temperature must be > 0 (it divides the "
              "logits when sampling), got {}", o.temperature);
  REMAT_CHECK(!o.prompt.empty(), "train: --prompt must not be empty (the sample continues it)");
  check_threads(o.threads, "train");
  check_distribution(o.gradient_accumulation_steps, o.local_sgd_steps, o.diloco);
  REMAT_CHECK(o.checkpointing.empty() ||
                  (!names_training_argument(o.trainer_flags, "gradient_checkpointing") &&
                   !names_training_argument(o.trainer_flags, "gradient_checkpointing_kwargs")),
              "train: give --checkpointing (and --checkpointing-budget) or --gradient-checkpointing (and "
              "--gradient-checkpointing-kwargs), not both");
  const TrainingArguments args = trainer_arguments(o);
  check(args);
  REMAT_CHECK((o.checkpointing_profile.empty() && o.save_checkpointing_profile.empty()) ||
                  args.gradient_checkpointing,
              "train: --checkpointing-profile and --save-checkpointing-profile need --checkpointing or "
              "--gradient-checkpointing");
}

namespace {

// The files a run writes (rank 0's; "" elsewhere or when not asked), and
// the lock on the weights folder, held for the run.
struct KjvOutputs {
  std::string weights_path, profile_out;
  std::unique_ptr<RunLock> weights_lock;
};

// Every output can be written and no two flags name one file: found now,
// not after training. A second run writing the same weights folder stops
// here, naming it (the lock is "W.lock" beside the folder W).
KjvOutputs check_outputs(const KjvGptOptions& options, bool main_process) {
  const std::string weights_path = main_process ? options.weights_path : "";
  const std::string profile_out = main_process ? options.save_checkpointing_profile : "";
  check_output_path(profile_out, "--save-checkpointing-profile");
  check_distinct_paths({{"--save-weights", weights_path}, {"--save-checkpointing-profile", profile_out},
                        {"--text", options.text_path}});
  REMAT_CHECK(weights_path.empty() || !std::filesystem::exists(weights_path) ||
                  std::filesystem::is_directory(weights_path),
              "train: --save-weights '{}' is a file; it names a folder, for config.json and model.safetensors",
              weights_path);
  check_output_path(std::filesystem::is_directory(weights_path)
                        ? (std::filesystem::path(weights_path) / "model.safetensors").string()
                        : weights_path,
                    "--save-weights");
  return {weights_path, profile_out,
          weights_path.empty() ? nullptr : std::make_unique<RunLock>(weights_path, "--save-weights")};
}

// What --save-weights records beside the weights.
nn::SafetensorsMetadata weights_metadata(const data::CharTokenizer& tokenizer, int64_t steps) {
  return {{"task", "kjv-gpt"}, {"symbols", tokenizer.symbols()}, {"steps", std::to_string(steps)}};
}

// --save-weights has room on its disk: found before training, not after.
void check_weights_room(int64_t bytes, const KjvOutputs& outputs) {
  if (outputs.weights_path.empty()) return;
  check_free_space(outputs.weights_path, bytes, "--save-weights");
}

// Where the trained weights are when --save-weights failed after training:
// the checkpoint of the run's last step (or its best, where the model ended
// on it), or nowhere.
std::string weights_left_in(const Trainer& trainer) {
  const TrainingArguments& args = trainer.args();
  if (args.output_dir.empty()) {
    return "the trained weights were not saved anywhere else (with --output-dir a run keeps checkpoints of them)";
  }
  const std::string folder = args.load_best_model_at_end && !trainer.best_model_checkpoint().empty()
                                 ? trainer.best_model_checkpoint()
                                 : (std::filesystem::path(args.output_dir) /
                                    fmt::format("checkpoint-{}", trainer.global_step())).string();
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) {
    return fmt::format("the trained weights were not saved anywhere else ('{}' is not there)", folder);
  }
  return fmt::format("the trained weights are in the checkpoint '{}'; once there is room, the same command with "
                     "--resume-from-checkpoint {} writes them without training again", folder, folder);
}

std::vector<int64_t> encode_prompt(const data::CharTokenizer& tokenizer, const std::string& prompt) {
  try {
    return tokenizer.encode(prompt);
  } catch (const Error& e) {
    REMAT_FAIL("train: --prompt '{}' cannot start a sample of this text: {}", prompt, e.what());
  }
}

// The model's configuration: the flags', or --init-from's, whose vocabulary
// and symbols must be this text's.
nn::GPTConfig model_config(const KjvGptOptions& options, const data::CharTokenizer& tokenizer) {
  nn::GPTConfig config{.vocab_size = tokenizer.vocab_size(), .block_size = options.block_size,
                       .n_layer = options.n_layer, .n_head = options.n_head, .n_embd = options.n_embd,
                       .dropout = options.dropout, .tie_weights = options.tie_weights, .seed = options.seed,
                       .attention = nn::parse_attention_path(options.attention)};
  if (!options.init_from.empty()) {
    config = nn::load_gpt2_config(options.init_from, options.seed);
    config.attention = nn::parse_attention_path(options.attention);
    REMAT_CHECK(config.vocab_size == tokenizer.vocab_size(), "train: --init-from '{}' has a vocabulary of {}, this "
                "text {} symbols", options.init_from, config.vocab_size, tokenizer.vocab_size());
    const std::string weights = (std::filesystem::path(options.init_from) / "model.safetensors").string();
    const nn::SafetensorsMetadata recorded = nn::read_safetensors_metadata(weights);
    if (const auto it = recorded.find("symbols"); it != recorded.end()) {
      REMAT_CHECK(it->second == tokenizer.symbols(), "train: --init-from '{}' was trained on other symbols than "
                  "this text's (its ids would stand for other characters)", options.init_from);
    }
  }
  return config;
}

// A Llama's configuration: the flags', or --init-from's (a Llama folder),
// whose vocabulary must be this text's (a Llama folder records no symbols).
nn::LlamaConfig llama_config(const KjvGptOptions& options, const data::CharTokenizer& tokenizer) {
  if (!options.init_from.empty()) {
    const nn::LlamaConfig config = nn::load_llama_config(options.init_from, DType::Float32, options.seed);
    REMAT_CHECK(config.vocab_size == tokenizer.vocab_size(), "train: --init-from '{}' has a vocabulary of {}, this "
                "text {} symbols", options.init_from, config.vocab_size, tokenizer.vocab_size());
    return config;
  }
  return {.vocab_size = tokenizer.vocab_size(), .hidden_size = options.n_embd,
          .intermediate_size = options.intermediate_size, .num_hidden_layers = options.n_layer,
          .num_attention_heads = options.n_head, .num_key_value_heads = options.n_kv_head,
          .max_position_embeddings = options.block_size, .rope_theta = options.rope_theta, .rms_norm_eps = 1e-5,
          .tie_word_embeddings = options.tie_weights, .seed = options.seed};
}

// The task's model, a GPT or a Llama, by what the task does with it.
struct KjvModel {
  std::shared_ptr<nn::Module> module;
  int64_t block_size = 0;
  nn::SafetensorsMetadata run_description;  // what a checkpoint records (describe_run)
  std::function<Tensor(const data::Batch&)> loss;
  // The sample at the end: `count` characters after the prompt.
  std::function<std::vector<int64_t>(std::vector<int64_t> prompt, int64_t count, double temperature, Generator&)>
      sample;
  // --save-weights: the Hugging Face folder, and about how many bytes it takes.
  std::function<void(const std::string& folder, int64_t steps)> save;
  std::function<int64_t()> saved_bytes;
};

// The model of `options`, initialised from its seed (initialisation and
// GPT's dropout use seed and seed + 1), or from --init-from's weights.
KjvModel make_model(const KjvGptOptions& options, const data::CharTokenizer& tokenizer, uint64_t text_fingerprint) {
  if (options.model == "llama") {
    const nn::LlamaConfig config = llama_config(options, tokenizer);
    auto llama = std::make_shared<nn::Llama>(config);
    if (!options.init_from.empty()) nn::load_llama_weights(*llama, options.init_from);
    return {.module = llama,
            .block_size = config.max_position_embeddings,
            .run_description = describe_run(llama->config(), tokenizer, text_fingerprint),
            .loss = [llama](const data::Batch& batch) { return llama->forward(batch.inputs, batch.targets).loss; },
            .sample = [llama](std::vector<int64_t> prompt, int64_t count, double temperature, Generator& generator) {
              return nn::generate_tokens(*llama, std::move(prompt), count, llama->config().max_position_embeddings,
                                       temperature, generator, "kjv-llama");
            },
            .save = [llama](const std::string& folder, int64_t) { nn::save_llama_pretrained(*llama, folder); },
            // The weights and a few KiB of JSON (safetensors' header, config.json).
            .saved_bytes = [llama] { return llama->num_parameters() * 4 + (int64_t{64} << 10); }};
  }
  const nn::GPTConfig config = model_config(options, tokenizer);
  auto gpt = std::make_shared<nn::GPT>(config);
  if (!options.init_from.empty()) nn::load_gpt2_weights(*gpt, options.init_from);
  return {.module = gpt,
          .block_size = config.block_size,
          .run_description = describe_run(config, tokenizer, text_fingerprint),
          .loss = [gpt](const data::Batch& batch) { return gpt->forward(batch.inputs, batch.targets).loss; },
          .sample = [gpt](std::vector<int64_t> prompt, int64_t count, double temperature, Generator& generator) {
            return gpt->generate(std::move(prompt), count, temperature, generator);
          },
          .save = [gpt, &tokenizer](const std::string& folder, int64_t steps) {
            nn::save_gpt2_pretrained(*gpt, folder, weights_metadata(tokenizer, steps));
          },
          .saved_bytes = [gpt, &tokenizer, steps = options.max_steps] {
            return nn::gpt2_pretrained_bytes(*gpt, weights_metadata(tokenizer, steps));
          }};
}

// The text's blocks: the first 90% to train on, the validation rows spread
// over the last 10%.
std::pair<data::Dataset, data::Dataset> text_sets(const std::string& text, const data::CharTokenizer& tokenizer,
                                                  int64_t block_size, const KjvGptOptions& options) {
  const data::TextSplit split = data::split_text(tokenizer.encode(text));
  const char* context_key = options.model == "llama" ? "max_position_embeddings" : "n_positions";
  REMAT_CHECK(split.validation.size(0) > block_size, "train: the text's validation split (its last 10%, "
              "{} characters) is too short for one block of {} characters{}", split.validation.size(0),
              block_size, options.init_from.empty() ? std::string(" (--block-size)")
                                                    : fmt::format(" ({} of '{}')", context_key, options.init_from));
  return {data::text_blocks(split.train, block_size),
          spread_rows(data::text_blocks(split.validation, block_size), options.eval_batches * options.batch_size)};
}

// --checkpointing-profile: enabled here with the saved plan (the Trainer
// would enable it without).
void enable_saved_plan(nn::Module& model, const TrainingArguments& args, const std::string& profile_path) {
  const GradientCheckpointingKwargs& k = args.gradient_checkpointing_kwargs;
  const scheduler::GraphProfile saved = scheduler::load_profile(profile_path);
  model.gradient_checkpointing_enable(
      {.policy = k.policy, .budget = k.budget, .overrides = k.overrides()},
      &saved);
}

// The Trainer's steps and evaluations, as rows of the task's log: the
// Trainer's callbacks, and what they count between two evaluations.
struct EvalRows {
  const TrainingArguments& args;
  int64_t block_size;
  const std::function<void(const KjvEval&)>& on_eval;
  const std::function<void(const StepStats&)>& on_step;
  const std::function<void(const Metrics&)>& on_log;
  KjvResult& result;
  Trainer* running = nullptr;
  std::optional<int64_t> first_step;
  StepStats last;
  double loss_sum = 0;
  int64_t losses = 0, peak = 0, first_peak = 0;
  int64_t samples = 0;  // rows trained on this rank since the first step, as they ran

  void step_end(const StepStats& step) {
    if (!first_step) first_step = step.step - 1;
    int64_t& into = step.step - 1 == *first_step ? first_peak : peak;
    into = std::max(into, step.peak_activation_bytes);
    loss_sum += step.loss;
    ++losses;
    samples += step.samples;
    last = step;
    if (on_step) on_step(step);
  }

  void log(const Metrics& metrics) {
    if (on_log) {
      on_log(metrics);
    } else {
      fmt::print("{}\n", format_metrics(metrics));
      std::fflush(stdout);
    }
    const auto value = [&](const std::string& name) -> std::optional<double> {
      for (const auto& [key, v] : metrics) {
        if (key == name) return v;
      }
      return std::nullopt;
    };
    const std::optional<double> val_loss = value("eval_loss");
    if (!val_loss) return;
    const comm::CommStats& traffic = running->accelerator().communicator().stats();
    const int64_t tokens = samples * block_size;  // the rows run, not steps x batch (a last batch may be smaller)
    KjvEval eval{.step = running->global_step(), .train_loss = losses > 0 ? loss_sum / static_cast<double>(losses) : 0.0,
                 .val_loss = *val_loss, .val_perplexity = value("eval_perplexity").value_or(std::exp(*val_loss)),
                 .lr = last.learning_rate, .seconds = last.seconds,
                 .tokens_per_second = last.seconds > 0 ? static_cast<double>(tokens) / last.seconds : 0.0,
                 .peak_activation_bytes = peak, .first_step_peak_activation_bytes = first_peak,
                 .allreduce_calls = traffic.allreduce_calls, .allreduce_bytes = traffic.allreduce_bytes};
    result.curve.push_back(eval);
    if (on_eval) on_eval(eval);
    loss_sum = 0;
    losses = 0;
  }

  TrainerCallbacks callbacks() {
    TrainerCallbacks callbacks;
    callbacks.on_step_end = [this](const StepStats& step) { step_end(step); };
    callbacks.on_log = [this](const Metrics& metrics) { log(metrics); };
    return callbacks;
  }
};

// After training: the weights and the profile asked for, and rank 0's
// sample. A save that fails does not keep the other from being tried; the
// error names each that failed (and, for the weights, where they still are).
void finish_run(const KjvModel& kjv, Trainer& trainer, const KjvOutputs& outputs, const data::CharTokenizer& tokenizer,
                const std::vector<int64_t>& prompt, const KjvGptOptions& options, KjvResult& result) {
  const nn::Module& model = *kjv.module;
  std::vector<std::string> failed;
  if (!outputs.weights_path.empty()) {
    try {
      kjv.save(outputs.weights_path, trainer.global_step());
    } catch (const Error& e) {
      failed.push_back(fmt::format("train: --save-weights '{}' was not written: {}; {}", outputs.weights_path,
                                   e.what(), weights_left_in(trainer)));
    }
  }
  if (!outputs.profile_out.empty() && result.first_step == trainer.global_step() &&
      model.checkpointing_profile() == nullptr) {
    // Resumed at the last step (to write weights a failed save lost): no
    // step ran, so there is no graph, and the file asked for is left as is.
    fmt::print(stderr, "train: --save-checkpointing-profile '{}' was not written: no step ran (resumed at step {}, "
               "the last)\n", outputs.profile_out, trainer.global_step());
  } else if (!outputs.profile_out.empty()) {
    try {
      const scheduler::GraphProfile* profile = model.checkpointing_profile();
      REMAT_CHECK(profile != nullptr, "no graph was planned (a run of one step only profiles it; run two or more)");
      scheduler::save_profile(*profile, outputs.profile_out);
    } catch (const Error& e) {
      failed.push_back(fmt::format("train: --save-checkpointing-profile '{}' was not written: {}",
                                   outputs.profile_out, e.what()));
    }
  }
  REMAT_CHECK(failed.empty(), "{}", fmt::join(failed, "\n"));
  if (trainer.accelerator().is_main_process()) {
    Generator sampler(options.seed + 7);
    result.sample = tokenizer.decode(kjv.sample(prompt, options.sample_chars, options.temperature, sampler));
  }
}

}  // namespace

KjvResult train_kjv_gpt(const KjvGptOptions& options, const std::function<void(const KjvEval&)>& on_eval,
                        const std::function<void(const StepStats&)>& on_step,
                        const std::function<void(const Metrics&)>& on_log) {
  check_options(options);
  kernels::cpu::set_num_threads(options.threads);
  const TrainingArguments args = trainer_arguments(options);
  const bool main_process = std::max(0, comm::Mpi::launch_rank()) == 0;
  const KjvOutputs outputs = check_outputs(options, main_process);

  const std::string text = options.text_path.empty() ? data::load_kjv() : data::load_text_file(options.text_path);
  const data::CharTokenizer tokenizer(text);
  const std::vector<int64_t> prompt = encode_prompt(tokenizer, options.prompt);
  const uint64_t text_fingerprint = data::fingerprint(text);
  // The model's initialisation and GPT's dropout use seed and seed + 1, the
  // Trainer's shuffle the seed.
  const KjvModel kjv = make_model(options, tokenizer, text_fingerprint);
  nn::Module& model = *kjv.module;
  const auto [train_set, val_set] = text_sets(text, tokenizer, kjv.block_size, options);
  check_weights_room(kjv.saved_bytes(), outputs);
  if (!options.checkpointing_profile.empty()) enable_saved_plan(model, args, options.checkpointing_profile);

  KjvResult result{.parameters = model.num_parameters(), .vocab_size = tokenizer.vocab_size()};
  EvalRows rows{.args = args, .block_size = kjv.block_size, .on_eval = on_eval, .on_step = on_step,
                .on_log = on_log, .result = result};
  const ForwardFn forward = [&kjv](nn::Module&, const data::Batch& batch) {
    return ModelOutput{kjv.loss(batch), Tensor()};
  };
  Trainer trainer(model, args, train_set, &val_set, language_model_metrics, forward, rows.callbacks());
  rows.running = &trainer;
  check_ranks_agree(trainer.accelerator().host_communicator(), shared_settings(options, text_fingerprint), "train");
  trainer.set_run_description(kjv.run_description);
  const TrainOutput trained = trainer.train();
  result.first_step = trained.resumed_at_step;
  // The last step's validation, where it was not one of the interval's
  // (a run stopped by its time limit, or one shorter than the interval);
  // none where the run resumed had nothing to train (no row twice).
  const bool took_steps = trained.global_step > trained.resumed_at_step;
  if (took_steps && trainer.evaluated_at_step() != trainer.global_step()) trainer.evaluate();
  finish_run(kjv, trainer, outputs, tokenizer, prompt, options, result);
  return result;
}

}  // namespace remat::tasks
