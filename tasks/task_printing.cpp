// The printing of a task's run; see task_printing.h.
#include "tasks/task_printing.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "comm/mpi.h"
#include "engine/factory.h"
#include "kernels/cpu/gemm_library.h"
#include "kernels/cpu/parallel.h"
#include "train/progress.h"
#include "train/trainer.h"
#include "train/training_arguments.h"

namespace remat::tasks {
namespace {

std::string mib(int64_t bytes) { return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

// Rank 0 of an mpirun launch, or the only process: the one that prints.
bool main_process() { return comm::Mpi::launch_rank() <= 0; }

// Sets the threads the task will run (an invalid count is its error) and
// prints "gemm: BLIS 0.9.0, haswell kernels (the CPU's AVX2+FMA, by CPUID), 2 threads".
void set_threads_and_print_gemm(int threads) {
  kernels::cpu::set_num_threads(threads);  // as the task will; an invalid count is its error
  fmt::print("gemm: {}\n", kernels::cpu::gemm_summary());
}

// The device a run trains on, when it is not the CPU: the GPU, driver, CUDA
// and cuBLAS versions (under mpirun each rank takes its local GPU instead).
void print_device(const std::string& name) {
  const Device device = device_from_name(name);
  if (device.is_cuda()) fmt::print("device: {}\n", device_description(device));
}


void print_epoch(const EpochResult& r, bool json) {
  if (json) {
    fmt::print("{{\"epoch\": {}, \"train_loss\": {:.6f}, \"test_loss\": {:.6f}, \"test_accuracy\": {:.4f}, "
               "\"test_f1\": {:.4f}, \"seconds\": {:.3f}, \"peak_activation_bytes\": {}, \"ranks\": {}, "
               "\"optimizer_steps\": {}, \"allreduce_calls\": {}, \"allreduce_bytes\": {}, \"comm_seconds\": {:.3f}}}\n",
               r.epoch, r.train_loss, r.test_loss, r.test_accuracy, r.test_f1, r.seconds, r.peak_activation_bytes,
               r.ranks, r.optimizer_steps, r.allreduce_calls, r.allreduce_bytes, r.comm_seconds);
  } else {
    fmt::print("epoch {}: train_loss {:.4f}, test_acc {:.2f}%, test_f1 {:.4f}, {:.1f} s, peak activation {}, "
               "{} allreduce calls ({}, {:.2f} s)\n", r.epoch, r.train_loss, 100.0 * r.test_accuracy, r.test_f1,
               r.seconds, mib(r.peak_activation_bytes), r.allreduce_calls, mib(r.allreduce_bytes), r.comm_seconds);
  }
  std::fflush(stdout);
}

}  // namespace

void run_fashion_mnist(const FashionMnistOptions& options, bool json) {
  check_options(options);  // before the header
  const train::TrainingArguments args = trainer_arguments(options);
  if (!json && main_process()) {
    fmt::print("{}\n", run_header(options, args));  // the arguments it trains with
    set_threads_and_print_gemm(options.threads);
    print_device(options.device);
    if (!options.trainer_flags.empty()) fmt::print("trainer arguments: {}\n", fmt::join(options.trainer_flags, " "));
    std::fflush(stdout);
  }
  train::Progress progress;  // a bar on a terminal, a line every 5 s elsewhere (train/progress.h)
  // The Trainer prints its dicts ({'epoch': 1.0, 'eval_loss': ...}); after
  // each epoch a line of what remat measured. --json: one JSON line per epoch.
  auto on_epoch = [&](const EpochResult& r) {
    progress.finish();
    print_epoch(r, json);
  };
  auto on_step = [&](const train::StepStats& step) {
    // The rows the step ran (auto_find_batch_size may have chosen another
    // batch; an epoch's last batch may be smaller), on every rank.
    progress.update(step.step, step.steps, step.mean_loss,
                    static_cast<double>(step.samples * std::max(1, comm::Mpi::launch_size())));
    if (step.step == step.steps) progress.finish();
  };
  // The Trainer's dicts on their own lines, between redraws of the bar;
  // with --json only the JSON lines.
  const auto on_log = [&](const train::Metrics& metrics) {
    if (json) return;
    progress.finish();
    fmt::print("{}\n", train::format_metrics(metrics));
    std::fflush(stdout);
  };
  train_fashion_mnist(options, on_epoch, on_step, on_log);
}

namespace {

void print_kjv_header(const KjvGptOptions& options, const train::TrainingArguments& args) {
  fmt::print("{}\n", run_header(options, args));  // the arguments it trains with
  set_threads_and_print_gemm(options.threads);
  print_device(options.device);
  if (!options.trainer_flags.empty()) fmt::print("trainer arguments: {}\n", fmt::join(options.trainer_flags, " "));
  fmt::print("{:>6} {:>11} {:>9} {:>9} {:>9} {:>8} {:>13} {:>16} {:>16} {:>10}\n", "step", "train_loss", "val_loss",
             "val_ppl", "lr", "seconds", "tokens/s/rank", "peak_activation", "first_step_peak", "allreduce");
  std::fflush(stdout);
}

void print_kjv_eval(const KjvEval& e, bool json) {
  if (json) {
    fmt::print("{{\"step\": {}, \"train_loss\": {:.6f}, \"val_loss\": {:.6f}, \"val_perplexity\": {:.6f}, "
               "\"lr\": {:.6g}, \"seconds\": {:.3f}, \"tokens_per_second\": {:.1f}, \"peak_activation_bytes\": {}, "
               "\"first_step_peak_activation_bytes\": {}, \"allreduce_calls\": {}, \"allreduce_bytes\": {}}}\n",
               e.step, e.train_loss, e.val_loss, e.val_perplexity, e.lr, e.seconds, e.tokens_per_second,
               e.peak_activation_bytes, e.first_step_peak_activation_bytes, e.allreduce_calls, e.allreduce_bytes);
  } else {
    fmt::print("{:>6} {:>11.4f} {:>9.4f} {:>9.3f} {:>9.2e} {:>8.1f} {:>13.0f} {:>16} {:>16} {:>10}\n", e.step,
               e.train_loss, e.val_loss, e.val_perplexity, e.lr, e.seconds, e.tokens_per_second,
               mib(e.peak_activation_bytes), mib(e.first_step_peak_activation_bytes), e.allreduce_calls);
  }
  std::fflush(stdout);
}

}  // namespace

void run_kjv_gpt(const KjvGptOptions& options, bool json) {
  check_options(options);  // before the header
  const train::TrainingArguments args = trainer_arguments(options);
  if (!json && main_process()) print_kjv_header(options, args);
  // A bar on a terminal, a line every 5 s elsewhere (train/progress.h), and
  // a row of the table at each validation. --json: one JSON line per row.
  train::Progress progress;
  auto on_eval = [&](const KjvEval& e) {
    progress.finish();
    print_kjv_eval(e, json);
  };
  auto on_step = [&](const train::StepStats& step) {
    // The rows the step ran (auto_find_batch_size may have chosen another
    // batch; an epoch's last batch may be smaller), on every rank.
    if (!json) {
      progress.update(step.step, step.steps, step.mean_loss,
                      static_cast<double>(step.samples * std::max(1, comm::Mpi::launch_size())));
    }
  };
  // The table says what the Trainer's dicts would (they are in
  // --output-dir's trainer_state.json).
  const auto on_log = [](const train::Metrics&) {};
  const KjvResult result = train_kjv_gpt(options, on_eval, on_step, on_log);
  progress.finish();
  if (!main_process()) return;
  if (result.first_step > 0 && !json) fmt::print("(resumed at step {})\n", result.first_step);
  if (json) {
    fmt::print("{}\n", nlohmann::json{{"sample", result.sample}, {"parameters", result.parameters}}.dump());
  } else {
    fmt::print("\n{} parameters, vocabulary {}. Sample (temperature {}):\n{}\n", result.parameters, result.vocab_size,
               options.temperature, result.sample);
  }
}

}  // namespace remat::tasks
