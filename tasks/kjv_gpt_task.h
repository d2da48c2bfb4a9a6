// The kjv-gpt task: a small GPT trained as a character-level language model
// on the King James Bible (Debian's bible-kjv), AdamW with warm-up and cosine
// decay, validation loss measured as it goes, and a sample of generated text
// at the end, run by the Trainer. Called by `remat train --task kjv-gpt`;
// with KjvGptOptions::model "llama" it is the kjv-llama task (`remat train
// --task kjv-llama`), the same flow with a Llama (nn/llama.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/averaging.h"
#include "train/metrics.h"
#include "train/trainer.h"
#include "train/training_arguments.h"

namespace remat::tasks {

struct KjvGptOptions {
  std::string device = "cpu";  // cpu, or cuda[:N]
  // Model: "gpt" (task kjv-gpt) or "llama" (task kjv-llama: nn::Llama, with
  // n_layer, n_head, n_embd and block_size below as its num_hidden_layers,
  // num_attention_heads, hidden_size and max_position_embeddings, and the
  // Llama's own sizes after them; no dropout, the fused attention).
  std::string model = "gpt";
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t block_size = 128;
  double dropout = 0.0;
  bool tie_weights = true;  // lm_head shares transformer.wte.weight (GPT-2's choice)
  std::string attention = "fused";  // or "explicit" (nn/gpt.h, AttentionPath; explicit whenever dropout > 0)
  int64_t n_kv_head = 2;            // llama: key/value heads, dividing n_head
  int64_t intermediate_size = 384;  // llama: the SwiGLU MLP's width
  double rope_theta = 10000.0;      // llama: RoPE's base
  // Activation checkpointing (docs/checkpointing.md): a policy of
  // scheduler/plan.h, "" for none, and for the policies that take one (cost, chain, milp, auto, dtr) a byte budget.
  std::string checkpointing;
  std::optional<int64_t> checkpointing_budget;
  // A profile of this model's graph saved by an earlier run
  // (save_checkpointing_profile): every step runs under its plan, the first
  // too, and the plan is kept (the same on every run), so the budget holds
  // from the first step, and a budget below the graph's minimum is an error
  // before it; so is a profile of another graph (another model, batch or
  // context), naming both signatures and the first node that differs.
  // Empty: the first step is planned from a rehearsal of it.
  std::string checkpointing_profile;
  // Written at the end: the profile the run planned from (scheduler/profile_json.h).
  std::string save_checkpointing_profile;
  // Optimisation.
  int64_t batch_size = 32;
  int64_t max_steps = 1000;          // the cosine schedule ends here
  double time_limit_seconds = 0;  // stops early at this wall time (0: none, the default)
  double lr = 3e-3;
  double min_lr_ratio = 0.1;
  int64_t warmup_steps = 100;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  // Measurement and output.
  int64_t eval_interval = 100;  // steps between validation measurements
  int64_t eval_batches = 16;    // batches of validation blocks per measurement
  int64_t sample_chars = 400;
  double temperature = 0.8;
  std::string prompt = "And God said";
  std::string text_path;  // a text file instead of the KJV (tests, other corpora)
  // At the end, a Hugging Face GPT-2 directory (nn/gpt2_pretrained.h:
  // config.json and model.safetensors, the vocabulary in its metadata) that
  // GPT2LMHeadModel.from_pretrained reads; for a Llama, a Llama directory
  // (nn/llama_pretrained.h) that LlamaForCausalLM reads (it records no
  // vocabulary). Empty: not written.
  std::string weights_path;
  // Start from the weights of such a directory (one this task wrote, or any
  // GPT-2 or Llama, as `model` says, of the text's vocabulary size): the
  // model's configuration is the directory's, and the sizes above are not
  // used. A directory that records its symbols must have this text's.
  // Empty: a fresh initialisation from the seed.
  std::string init_from;
  uint64_t seed = 0;
  int threads = 2;
  // Distribution (as for fashion-mnist): under mpirun each rank reads its
  // shard of every epoch's blocks (batch_size is per rank); micro-batches per
  // optimizer step; LocalSGD's steps between averages (0: synchronous data
  // parallel); DiLoCo's outer step at each average.
  int64_t gradient_accumulation_steps = 1;
  int64_t local_sgd_steps = 0;
  std::optional<comm::DiLoCoOptions> diloco;
  // Trainer arguments by Hugging Face's names, applied last
  // (train/training_arguments.h). With --output-dir DIR the Trainer saves
  // DIR/checkpoint-STEP/ at every eval_interval steps (and when it stops),
  // --resume-from-checkpoint latest continues from the newest (bit for bit,
  // except under LocalSGD, where every rank resumes with rank 0's AdamW
  // moments; docs/distributed.md), and --overwrite-output-dir starts over in
  // a folder that has some. A
  // checkpoint records the model's configuration, the vocabulary and a
  // fingerprint of the text, and a resume that differs is an error naming what.
  std::vector<std::string> trainer_flags;
  // The flags of task_flags() the user gave ("--lr", "--max-steps"; the
  // CLI's). A trainer flag that gives one of their arguments another value
  // (--lr 3e-3 --learning-rate 1e-3) is an error naming both; an empty
  // --checkpointing is an error, not "no policy"; a warm-up ratio replaces
  // --warmup-steps only where it was not given. Empty: every field above
  // is a default the trainer flags may replace.
  std::vector<std::string> flags_given;
};

// The task's flags that give training arguments (--lr: learning_rate), one
// row each (Note [One value per setting] in train/training_arguments.cpp):
// what trainer_arguments builds from, and what flags_given is checked by.
const std::vector<train::TaskFlag<KjvGptOptions>>& task_flags(const KjvGptOptions&);

// "kjv-gpt" or "kjv-llama", as options.model says.
std::string task_name(const KjvGptOptions& options);

// The run's header line, from the arguments it trains with (the trainer
// flags' values where they give them): "task kjv-gpt: GPT 4 layers x 128
// channels, 4 heads, context 128, tied head, batch 32 per rank, AdamW lr
// 0.003, 1000 steps, 2 threads; 1 process" ("task kjv-llama: Llama 4 layers
// x 128 channels, 4 heads, 2 kv heads, MLP 384, context 128, ...").
std::string run_header(const KjvGptOptions& options, const train::TrainingArguments& args);

struct KjvEval {
  int64_t step = 0;
  double train_loss = 0;  // mean over the steps since the previous eval (rank 0's batches)
  double val_loss = 0;    // nats per character on the validation blocks
  double val_perplexity = 0;  // exp(val_loss)
  double lr = 0;
  double seconds = 0;     // since training started
  double tokens_per_second = 0;  // trained by this rank: the rows of the batches run, x block_size
  // Largest rise of activation + temporary bytes over a step's forward and
  // backward so far (the span a checkpointing budget bounds; clipping and
  // the optimizer come after it), the run's first step apart: under
  // checkpointing without a saved profile it profiles the graph (under
  // blocks, not the budget; docs/checkpointing.md), so the steady state is
  // the steps after it (0 until there is one).
  int64_t peak_activation_bytes = 0;
  int64_t first_step_peak_activation_bytes = 0;
  int64_t allreduce_calls = 0;        // this rank's, so far
  int64_t allreduce_bytes = 0;
};

struct KjvResult {
  int64_t first_step = 0;  // > 0 when resumed from a checkpoint
  std::vector<KjvEval> curve;  // on rank 0 (empty on the others)
  std::string sample;  // on rank 0
  int64_t parameters = 0;
  int64_t vocab_size = 0;
};

// Trains by the Trainer (train/trainer.h) on the text's consecutive blocks
// of block_size characters (data::text_blocks; the last 10% of the text is
// the validation split), shuffled each epoch: AdamW (betas 0.9, 0.95),
// warm-up then cosine decay to min_lr_ratio of the peak, gradients clipped.
// Every eval_interval steps, and after the last, it measures the loss on
// eval_batches x batch_size validation blocks spread over the split, and
// on_eval gets a row; at the end, a sample. Before the first step every
// option, the prompt and every output location are checked, and under
// mpirun the ranks check that they share every setting that must match
// (train/rank_agreement.h). A NaN or infinite loss, gradient norm or
// validation loss stops the run with an error naming the step, before a
// checkpoint of it is written. Under LocalSGD the models are averaged
// before each validation, so it is the common model's.
//
// on_eval, on_step (after each optimizer step) and on_log (every dict the
// Trainer logs; empty: printed as Python prints a dict) are called on
// rank 0 only.
KjvResult train_kjv_gpt(const KjvGptOptions& options, const std::function<void(const KjvEval&)>& on_eval = {},
                        const std::function<void(const train::StepStats&)>& on_step = {},
                        const std::function<void(const train::Metrics&)>& on_log = {});

// The check of every option's range that train_kjv_gpt starts with (the CLI
// calls it before printing its header): an error names the flag and value.
void check_options(const KjvGptOptions& options);

// The Trainer arguments a run of `options` trains with: the task's
// defaults (cosine_with_min_lr, betas 0.9 and 0.95, evaluation and saving
// every eval_interval steps), then its trainer_flags.
train::TrainingArguments trainer_arguments(const KjvGptOptions& options);

}  // namespace remat::tasks
