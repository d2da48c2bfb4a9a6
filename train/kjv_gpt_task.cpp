// The kjv-gpt task; see kjv_gpt_task.h.
#include "train/kjv_gpt_task.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include "engine/allocator.h"
#include "engine/factory.h"
#include "kernels/cpu/parallel.h"
#include "nn/gpt.h"
#include "nn/safetensors.h"
#include "ops/ops.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/lr_schedule.h"
#include "scheduler/plan.h"
#include "scheduler/profile_json.h"
#include "train/accelerator.h"
#include "train/checkpoint.h"
#include "train/limits.h"
#include "train/local_sgd.h"
#include "train/parse.h"
#include "train/rank_agreement.h"
#include "train/run_files.h"
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
    const data::Batch batch = data::to(windows.batch(i), accelerator.device());
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
  if (accelerator.num_processes() > 1) accelerator.host_communicator().broadcast(&stop, 1, DType::Int64, 0);
  return stop != 0;
}

std::string rank_path(const std::string& path, const Accelerator& accelerator) {
  if (path.empty() || accelerator.num_processes() == 1) return path;
  return fmt::format("{}.rank{}-of-{}", path, accelerator.rank(), accelerator.num_processes());
}

// What must be the same on every rank: everything that shapes the model, the
// data, the schedule and the collectives (rank 0 alone decides the time limit,
// but only ranks with a limit ask it).
std::vector<Setting> shared_settings(const KjvGptOptions& o, uint64_t text_fingerprint) {
  const auto text = [](auto value) { return fmt::format("{}", value); };
  return {{"--n-layer", text(o.n_layer)}, {"--n-head", text(o.n_head)}, {"--n-embd", text(o.n_embd)},
          {"--block-size", text(o.block_size)}, {"--dropout", text(o.dropout)},
          {"--batch-size", text(o.batch_size)}, {"--max-steps", text(o.max_steps)},
          {"--time-limit", text(o.time_limit_seconds)}, {"--lr", text(o.lr)}, {"min_lr_ratio", text(o.min_lr_ratio)},
          {"--warmup-steps", text(o.warmup_steps)}, {"--weight-decay", text(o.weight_decay)},
          {"grad_clip", text(o.grad_clip)}, {"--eval-interval", text(o.eval_interval)},
          {"--eval-batches", text(o.eval_batches)}, {"--seed", text(o.seed)},
          {"--gradient-accumulation-steps", text(o.gradient_accumulation_steps)},
          {"--local-sgd-steps", text(o.local_sgd_steps)},
          {"--diloco", o.diloco ? fmt::format("outer lr {}, momentum {}", o.diloco->outer_lr, o.diloco->momentum)
                                : std::string("off")},
          {"--resume", text(o.resume)},
          {"--text (a fingerprint of its bytes)", fmt::format("{:016x}", text_fingerprint)}};
}

// What a checkpoint records about its run, and a resume must match.
nn::SafetensorsMetadata describe_run(const KjvGptOptions& o, const data::CharTokenizer& tokenizer,
                                     uint64_t text_fingerprint, const Accelerator& accelerator) {
  return {{"task", "kjv-gpt"}, {"n_layer", std::to_string(o.n_layer)}, {"n_head", std::to_string(o.n_head)},
          {"n_embd", std::to_string(o.n_embd)}, {"block_size", std::to_string(o.block_size)},
          {"dropout", fmt::format("{}", o.dropout)}, {"vocab_size", std::to_string(tokenizer.vocab_size())},
          {"symbols", tokenizer.symbols()}, {"data_fingerprint", fmt::format("{:016x}", text_fingerprint)},
          {"world_size", std::to_string(accelerator.num_processes())}, {"rank", std::to_string(accelerator.rank())}};
}

bool all_digits(std::string_view text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

// Checkpoints of `path` that a run of another world size wrote: the path
// itself (one process) when this run has several, and path.rank<r>-of-<w>
// for another w. As (file, its world size).
std::vector<std::pair<std::string, std::string>> other_world_checkpoints(const std::string& path, int world) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, std::string>> found;
  std::error_code ec;
  if (world > 1 && fs::is_regular_file(path, ec)) found.emplace_back(path, "1");
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  const std::string prefix = fs::path(path).filename().string() + ".rank";
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string_view rest = std::string_view(name).substr(prefix.size());
    const size_t of = rest.find("-of-");
    if (of == std::string_view::npos || !all_digits(rest.substr(0, of)) || !all_digits(rest.substr(of + 4))) continue;
    const std::string size(rest.substr(of + 4));
    if (size != std::to_string(world)) found.emplace_back(entry.path().string(), size);
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

// Every option, before anything runs: a bad value found when training ends
// (a --temperature of 0 at sampling time) would lose the trained model.
void check_options(const KjvGptOptions& o) {
  REMAT_CHECK(check_device(o.device, "train").is_cpu() || !o.diloco, "train: --diloco's outer step runs on the "
              "CPU only, not on --device {}", o.device);
  REMAT_CHECK(o.n_layer >= 1 && o.n_head >= 1 && o.n_embd >= 1 && o.block_size >= 1, "train: --n-layer, --n-head, "
              "--n-embd and --block-size must be at least 1, got {}, {}, {} and {}", o.n_layer, o.n_head, o.n_embd,
              o.block_size);
  REMAT_CHECK(o.n_embd % o.n_head == 0, "train: --n-embd {} must be a multiple of --n-head {} (each head gets "
              "n_embd / n_head channels)", o.n_embd, o.n_head);
  REMAT_CHECK(o.dropout >= 0 && o.dropout < 1, "train: --dropout must be in [0, 1), got {}", o.dropout);
  if (!o.checkpointing.empty()) scheduler::check_policy(o.checkpointing);
  REMAT_CHECK(!o.checkpointing_budget || !o.checkpointing.empty(), "train: --checkpointing-budget needs "
              "--checkpointing cost or optimal (without a policy nothing is recomputed, and the budget would be "
              "ignored)");
  REMAT_CHECK(!o.checkpointing_budget || o.checkpointing == "cost" || o.checkpointing == "optimal",
              "train: --checkpointing {} takes no --checkpointing-budget (cost and optimal do)", o.checkpointing);
  REMAT_CHECK((o.checkpointing_profile.empty() && o.save_checkpointing_profile.empty()) || !o.checkpointing.empty(),
              "train: --checkpointing-profile and --save-checkpointing-profile need --checkpointing");
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
}

KjvResult train_kjv_gpt(const KjvGptOptions& options, const std::function<void(const KjvEval&)>& on_eval) {
  check_options(options);
  kernels::cpu::set_num_threads(options.threads);
  Accelerator accelerator({.gradient_accumulation_steps = options.gradient_accumulation_steps,
                           .device = device_from_name(options.device)});

  // Every output can be written, no two flags name one file, and no other
  // run is writing this checkpoint: found now, not after training.
  const std::string checkpoint_path = rank_path(options.checkpoint_path, accelerator);
  const std::string weights_path = accelerator.is_main_process() ? options.weights_path : "";
  check_output_path(checkpoint_path, "--checkpoint");
  check_output_path(weights_path, "--save-weights");
  const std::string profile_out = accelerator.is_main_process() ? options.save_checkpointing_profile : "";
  check_output_path(profile_out, "--save-checkpointing-profile");
  check_distinct_paths({{"--checkpoint", checkpoint_path}, {"--save-weights", weights_path},
                        {"--save-checkpointing-profile", profile_out},
                        {"--text", options.text_path}});
  std::optional<RunLock> lock;
  if (!checkpoint_path.empty()) lock.emplace(checkpoint_path, "--checkpoint");
  const bool resuming = options.resume && !checkpoint_path.empty() && std::filesystem::exists(checkpoint_path);
  REMAT_CHECK(checkpoint_path.empty() || options.resume || options.overwrite_checkpoint ||
                  !std::filesystem::exists(checkpoint_path),
              "train: --checkpoint '{}' already exists; give --resume to continue from it, or --overwrite-checkpoint "
              "to start over and replace it", checkpoint_path);
  if (options.resume && !checkpoint_path.empty() && !resuming) {
    const auto others = other_world_checkpoints(options.checkpoint_path, accelerator.num_processes());
    REMAT_CHECK(others.empty(), "train --resume: this run of {} process(es) has no checkpoint '{}', but '{}' is "
                "there, written by a run of {}; resume with as many processes (mpirun -np {}), or move those files "
                "away to start over", accelerator.num_processes(), checkpoint_path, others.front().first,
                others.front().second, others.front().second);
  }

  const std::string text = options.text_path.empty() ? data::load_kjv() : data::load_text_file(options.text_path);
  const data::CharTokenizer tokenizer(text);
  std::vector<int64_t> prompt;
  try {
    prompt = tokenizer.encode(options.prompt);
  } catch (const Error& e) {
    REMAT_FAIL("train: --prompt '{}' cannot start a sample of this text: {}", options.prompt, e.what());
  }
  const uint64_t text_fingerprint = data::fingerprint(text);
  check_ranks_agree(accelerator.host_communicator(), shared_settings(options, text_fingerprint), "train");
  const nn::SafetensorsMetadata run = describe_run(options, tokenizer, text_fingerprint, accelerator);
  if (resuming) check_checkpoint_matches(checkpoint_path, run);
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
    const scheduler::PlanOptions plan{.policy = options.checkpointing, .budget = options.checkpointing_budget};
    if (options.checkpointing_profile.empty()) {
      model.gradient_checkpointing_enable(plan);
    } else {
      const scheduler::GraphProfile saved = scheduler::load_profile(options.checkpointing_profile);
      model.gradient_checkpointing_enable(plan, &saved);
    }
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
  if (resuming) {
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
  Allocator& allocator = allocator_for(accelerator.device());
  const auto start = Clock::now();
  const int64_t k = options.gradient_accumulation_steps;
  const int64_t ranks = accelerator.num_processes();
  double loss_sum = 0;
  int64_t losses = 0, peak = 0, first_peak = 0;
  std::optional<int64_t> saved_step;  // of the checkpoint on disk
  if (resuming) saved_step = result.first_step;
  // A NaN or infinity stops the run before it reaches the weights, and so
  // before the next checkpoint could overwrite a good one.
  const auto check_finite = [&](int64_t step, const char* what, double value) {
    if (std::isfinite(value)) return;
    const std::string checkpoint = checkpoint_path.empty() ? "no --checkpoint was given"
                                   : saved_step ? fmt::format("the checkpoint '{}' of step {} is left as it was",
                                                              checkpoint_path, *saved_step)
                                                : fmt::format("no checkpoint was written to '{}'", checkpoint_path);
    REMAT_FAIL("train: step {}: the {} is {}, so training stopped ({}); a smaller --lr (this run's is {}) may help",
               step, what, value, checkpoint, options.lr);
  };
  if (options.checkpointing_budget && options.checkpointing_profile.empty() && result.first_step < options.max_steps) {
    // The first step within the budget too (or the run refused before it):
    // planned from a rehearsal of it on the meta device.
    const data::Batch batch =
        data::to(train_windows.batch(result.first_step * k * ranks + accelerator.rank()), accelerator.device());
    model.rehearse_checkpointing([&] { model.forward(batch.inputs, batch.targets).loss.backward(); });
  }
  for (int64_t step = result.first_step; step < options.max_steps; ++step) {
    int64_t step_peak = 0;
    for (int64_t micro = 0; micro < k; ++micro) {
      // Each rank its own windows; one rank without accumulation draws batch(step).
      const data::Batch batch =
          data::to(train_windows.batch((step * k + micro) * ranks + accelerator.rank()), accelerator.device());
      auto window = accelerator.accumulate(model);
      double loss_value = 0;
      {
        // The peak of forward and backward, the span a checkpointing budget
        // bounds (clipping's and AdamW's temporaries come after it).
        const int64_t transient_before = allocator.stats().live_transient;
        ScopedPeak scope(accelerator.device());
        Tensor loss = model.forward(batch.inputs, batch.targets).loss;
        loss_value = loss.item<double>();
        accelerator.backward(loss);
        step_peak = std::max(step_peak, scope.stats().peak_transient - transient_before);
      }
      if (accelerator.sync_gradients()) {
        // Checked before the loss: with data parallelism every rank holds the
        // averaged gradients here, so a NaN from one rank's batch stops every
        // rank at this same check instead of leaving the others waiting in a
        // collective. (Under LocalSGD each rank checks its own, and the job
        // ends through the CLI's MPI_Abort or the collective timeout.)
        check_finite(step + 1, "gradient norm", optim::clip_grad_norm(model.parameters(), options.grad_clip));
      }
      check_finite(step + 1, "loss", loss_value);
      optimizer.step();
      scheduler.step();
      optimizer.zero_grad();
      local_sgd.step();
      loss_sum += loss_value / static_cast<double>(k);
    }
    int64_t& into = step == result.first_step ? first_peak : peak;
    into = std::max(into, step_peak);
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
      // Weights that diverged (finite, but too large for a forward) show in
      // the validation loss: never a checkpoint of them.
      check_finite(step + 1, "validation loss", eval.val_loss);
      if (!checkpoint_path.empty()) {
        nn::SafetensorsMetadata metadata = run;
        metadata["dropout_offset"] = std::to_string(model.dropout_generator().offset());
        save_checkpoint(checkpoint_path, model, adamw, step + 1, metadata, local ? &local_sgd : nullptr);
        saved_step = step + 1;
      }
      if (on_eval && accelerator.is_main_process()) on_eval(eval);
      loss_sum = 0;
      losses = 0;
    }
    if (stop) break;
  }
  if (!profile_out.empty()) {
    const scheduler::GraphProfile* profile = model.checkpointing_profile();
    REMAT_CHECK(profile != nullptr, "train: --save-checkpointing-profile: no graph was planned (a run of one step "
                "only profiles it; run two or more)");
    scheduler::save_profile(*profile, profile_out);
  }
  if (!weights_path.empty()) {
    nn::save_safetensors(model, weights_path,
                         {{"task", "kjv-gpt"}, {"symbols", tokenizer.symbols()}, {"steps", std::to_string(
                             result.curve.empty() ? result.first_step : result.curve.back().step)}});
  }
  Generator sampler(options.seed + 7);
  const std::vector<int64_t> ids =
      model.generate(prompt, options.sample_chars, options.temperature, sampler);
  result.sample = tokenizer.decode(ids);
  return result;
}

}  // namespace remat::train
