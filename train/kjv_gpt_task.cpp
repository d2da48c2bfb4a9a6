// The kjv-gpt task; see kjv_gpt_task.h.
#include "train/kjv_gpt_task.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "engine/allocator.h"
#include "engine/factory.h"
#include "kernels/cpu/parallel.h"
#include "nn/gpt.h"
#include "nn/safetensors.h"
#include "ops/ops.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/lr_schedule.h"
#include "train/accelerator.h"
#include "train/checkpoint.h"
#include "train/local_sgd.h"
#include "train/parse.h"
#include "train/text_data.h"

namespace remat::train {
namespace {

using Clock = std::chrono::steady_clock;

// Mean loss over a fixed set of validation windows (the same every call),
// averaged over the ranks' models.
double validation_loss(nn::GPT& model, const data::TextWindows& windows, int64_t batches,
                       const Accelerator& accelerator) {
  NoGradGuard no_grad;
  model.eval();
  double total = 0;
  for (int64_t i = 0; i < batches; ++i) {
    const data::Batch batch = windows.batch(i);
    total += model.forward(batch.inputs, batch.targets).loss.item<double>();
  }
  model.train();
  double sum = 0;
  for (double loss : accelerator.gather(from_vector(std::vector<double>{total}, {1})).to_vector<double>()) sum += loss;
  return sum / static_cast<double>(batches * accelerator.num_processes());
}

// Whether rank 0 has run out of time: one decision for all ranks, so that
// they stop at the same step.
bool out_of_time(const KjvGptOptions& options, double seconds, const Accelerator& accelerator) {
  if (options.time_limit_seconds <= 0) return false;
  int64_t stop = seconds >= options.time_limit_seconds ? 1 : 0;
  if (accelerator.num_processes() > 1) accelerator.communicator().broadcast(&stop, 1, DType::Int64, 0);
  return stop != 0;
}

std::string rank_path(const std::string& path, const Accelerator& accelerator) {
  if (path.empty() || accelerator.num_processes() == 1) return path;
  return fmt::format("{}.rank{}-of-{}", path, accelerator.rank(), accelerator.num_processes());
}

}  // namespace

KjvResult train_kjv_gpt(const KjvGptOptions& options, const std::function<void(const KjvEval&)>& on_eval) {
  REMAT_CHECK(options.max_steps >= 1 && options.eval_interval >= 1 && options.eval_batches >= 1,
              "train: need max_steps, eval_interval and eval_batches >= 1, got {}, {}, {}", options.max_steps,
              options.eval_interval, options.eval_batches);
  REMAT_CHECK(options.threads >= 1, "train: --threads must be at least 1, got {}", options.threads);
  REMAT_CHECK(options.local_sgd_steps >= 0, "train: --local-sgd-steps must be >= 0, got {}", options.local_sgd_steps);
  REMAT_CHECK(!options.diloco || options.local_sgd_steps > 0, "train: DiLoCo needs --local-sgd-steps H > 0");
  kernels::cpu::set_num_threads(options.threads);
  Accelerator accelerator({.gradient_accumulation_steps = options.gradient_accumulation_steps});

  const std::string text = options.text_path.empty() ? data::load_kjv() : data::load_text_file(options.text_path);
  const data::CharTokenizer tokenizer(text);
  data::TextSplit split;
  {
    CategoryGuard data_bytes(MemoryCategory::Data);
    split = data::split_text(tokenizer.encode(text));
  }
  // Every random stream has a Philox key of its own: the model's initialisation
  // and dropout use seed and seed + 1 (nn::GPT), the windows these two.
  const data::TextWindows train_windows(split.train, options.block_size, options.batch_size,
                                        options.seed + (uint64_t{1} << 32));
  const data::TextWindows val_windows(split.validation, options.block_size, options.batch_size,
                                      options.seed + (uint64_t{2} << 32));

  nn::GPT model({.vocab_size = tokenizer.vocab_size(), .block_size = options.block_size, .n_layer = options.n_layer,
                 .n_head = options.n_head, .n_embd = options.n_embd, .dropout = options.dropout, .seed = options.seed});
  if (!options.checkpointing.empty()) {
    model.gradient_checkpointing_enable({.policy = options.checkpointing, .budget = options.checkpointing_budget});
  }
  accelerator.prepare(model);
  optim::AdamW adamw(model.parameters(), {.lr = options.lr, .beta1 = 0.9, .beta2 = 0.95,
                                          .weight_decay = options.weight_decay});
  optim::LRScheduler schedule(adamw, optim::ScheduleKind::WarmupCosine,
                              // A run shorter than the warm-up warms up over all of it.
                              {.warmup_steps = std::min(options.warmup_steps, options.max_steps),
                               .total_steps = options.max_steps,
                               .min_lr_ratio = options.min_lr_ratio});
  PreparedOptimizer optimizer = accelerator.prepare(adamw);
  PreparedScheduler scheduler = accelerator.prepare(schedule);
  const bool local = options.local_sgd_steps > 0;
  LocalSGD local_sgd(accelerator, model,
                     {.local_sgd_steps = std::max<int64_t>(options.local_sgd_steps, 1), .enabled = local,
                      .diloco = options.diloco});

  KjvResult result;
  const std::string checkpoint_path = rank_path(options.checkpoint_path, accelerator);
  if (options.resume && !checkpoint_path.empty() && std::filesystem::exists(checkpoint_path)) {
    result.first_step = load_checkpoint(checkpoint_path, model, adamw, local ? &local_sgd : nullptr);
    const auto metadata = nn::read_safetensors_metadata(checkpoint_path);
    if (const auto it = metadata.find("dropout_offset"); it != metadata.end()) {
      model.dropout_generator().set_offset(parse_integer<uint64_t>(it->second, "checkpoint dropout_offset"));
    }
    for (int64_t step = 0; step < result.first_step; ++step) schedule.step();
  }
  if (accelerator.num_processes() > 1) {
    // Each rank resumed from its own file; a job killed between the ranks'
    // writes leaves them at different steps, which must not train on.
    const std::vector<int64_t> steps =
        accelerator.gather(from_vector(std::vector<int64_t>{result.first_step}, {1})).to_vector<int64_t>();
    REMAT_CHECK(std::all_of(steps.begin(), steps.end(), [&](int64_t s) { return s == steps.front(); }),
                "train: the ranks' checkpoints hold different steps ({}, rank by rank); delete them to start over, "
                "or put back files of one step", fmt::join(steps, ", "));
  }
  result.parameters = model.num_parameters();
  result.vocab_size = tokenizer.vocab_size();
  Allocator& allocator = cpu_allocator();
  const auto start = Clock::now();
  const int64_t k = options.gradient_accumulation_steps;
  const int64_t ranks = accelerator.num_processes();
  double loss_sum = 0;
  int64_t losses = 0, peak = 0, first_peak = 0;
  for (int64_t step = result.first_step; step < options.max_steps; ++step) {
    const int64_t transient_before = allocator.stats().live_transient;
    ScopedPeak scope;
    for (int64_t micro = 0; micro < k; ++micro) {
      // Each rank its own windows; one rank without accumulation draws batch(step).
      const data::Batch batch = train_windows.batch((step * k + micro) * ranks + accelerator.rank());
      auto window = accelerator.accumulate(model);
      Tensor loss = model.forward(batch.inputs, batch.targets).loss;
      accelerator.backward(loss);
      if (accelerator.sync_gradients()) optim::clip_grad_norm(model.parameters(), options.grad_clip);
      optimizer.step();
      scheduler.step();
      optimizer.zero_grad();
      local_sgd.step();
      loss_sum += loss.item<double>() / static_cast<double>(k);
    }
    int64_t& into = step == result.first_step ? first_peak : peak;
    into = std::max(into, scope.stats().peak_transient - transient_before);
    ++losses;

    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const bool stop = out_of_time(options, seconds, accelerator);
    const bool last = step + 1 == options.max_steps || stop;
    if ((step + 1) % options.eval_interval == 0 || last) {
      if (last) local_sgd.finish();  // the final average: the last loss is the common model's
      const comm::CommStats& traffic = accelerator.communicator().stats();
      KjvEval eval{.step = step + 1, .train_loss = loss_sum / static_cast<double>(losses),
                   .val_loss = validation_loss(model, val_windows, options.eval_batches, accelerator),
                   .lr = schedule.last_lr(), .seconds = seconds,
                   .tokens_per_second = static_cast<double>((step + 1 - result.first_step) * k * options.batch_size *
                                                            options.block_size) / seconds,
                   .peak_activation_bytes = peak,
                   .first_step_peak_activation_bytes = first_peak,
                   .allreduce_calls = traffic.allreduce_calls,
                   .allreduce_bytes = traffic.allreduce_bytes};
      result.curve.push_back(eval);
      if (!checkpoint_path.empty()) {
        save_checkpoint(checkpoint_path, model, adamw, step + 1,
                        {{"task", "kjv-gpt"}, {"dropout_offset", std::to_string(model.dropout_generator().offset())}},
                        local ? &local_sgd : nullptr);
      }
      if (on_eval && accelerator.is_main_process()) on_eval(eval);
      loss_sum = 0;
      losses = 0;
    }
    if (stop) break;
  }
  if (!options.weights_path.empty() && accelerator.is_main_process()) {
    nn::save_safetensors(model, options.weights_path,
                         {{"task", "kjv-gpt"}, {"symbols", tokenizer.symbols()}, {"steps", std::to_string(
                             result.curve.empty() ? result.first_step : result.curve.back().step)}});
  }
  Generator sampler(options.seed + 7);
  const std::vector<int64_t> ids =
      model.generate(tokenizer.encode(options.prompt), options.sample_chars, options.temperature, sampler);
  result.sample = tokenizer.decode(ids);
  return result;
}

}  // namespace remat::train
