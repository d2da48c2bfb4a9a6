// remat: the command line program. Parses flags (CLI11) and calls train/;
// no training or measuring logic lives here.
//
//   remat train --task fashion-mnist [--epochs 3] [--json]
//   remat bench --workload W1 --policy none [--threads 1] [--steps 10] [--json]
//
// Each subcommand prints a human table by default and JSON lines with --json.
// Errors from the engine are printed as "remat: error: ..." with exit code 1;
// bad flags are reported by CLI11 with exit code 105 (its own codes).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/error.h"
#include "train/fashion_mnist_task.h"
#include "train/workload.h"

namespace {

using remat::train::EpochResult;

std::string mib(int64_t bytes) { return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

void run_train(const std::string& task, const remat::train::FashionMnistOptions& options, bool json) {
  REMAT_CHECK(task == "fashion-mnist", "train: unknown task '{}' (available: fashion-mnist)", task);
  if (!json) {
    fmt::print("task fashion-mnist: MLP 784-{}-10, AdamW lr {}, batch {}, {} epochs, {} threads\n",
               fmt::join(options.hidden, "-"), options.lr, options.batch_size, options.epochs, options.threads);
    fmt::print("{:>5} {:>11} {:>10} {:>9} {:>8} {:>16}\n", "epoch", "train_loss", "test_loss", "test_acc", "seconds",
               "peak_activation");
  }
  auto on_epoch = [&](const EpochResult& r) {
    if (json) {
      fmt::print("{{\"epoch\": {}, \"train_loss\": {:.6f}, \"test_loss\": {:.6f}, \"test_accuracy\": {:.4f}, "
                 "\"seconds\": {:.3f}, \"peak_activation_bytes\": {}}}\n",
                 r.epoch, r.train_loss, r.test_loss, r.test_accuracy, r.seconds, r.peak_activation_bytes);
    } else {
      fmt::print("{:>5} {:>11.4f} {:>10.4f} {:>8.2f}% {:>8.1f} {:>16}\n", r.epoch, r.train_loss, r.test_loss,
                 100.0 * r.test_accuracy, r.seconds, mib(r.peak_activation_bytes));
    }
    std::fflush(stdout);
  };
  auto on_progress = [](int64_t batch, int64_t batches, double loss) {
    fmt::print(stderr, "  batch {}/{}  running loss {:.4f}\n", batch, batches, loss);
  };
  remat::train::train_fashion_mnist(options, on_epoch, on_progress);
}

void run_bench(const remat::train::WorkloadOptions& options, bool json) {
  const remat::train::WorkloadReport report = remat::train::run_workload(options);
  if (json) {
    fmt::print("{}\n", report.to_json().dump());
    return;
  }
  const nlohmann::ordered_json fields = report.to_json();
  for (const auto& [key, value] : fields.items()) {
    std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (value.is_number_integer() && key.find("bytes") != std::string::npos) text += " (" + mib(value.get<int64_t>()) + ")";
    fmt::print("{:<33} {}\n", key, text);
  }
}

// OpenMP threads that spin while idle take the cores from OpenBLAS's own
// (pthread) threads: a 2-thread training run was 3x slower with libgomp's
// default policy. libgomp reads OMP_WAIT_POLICY when it loads, before
// main(), so the program sets it and runs itself again, once.
void make_openmp_threads_sleep_when_idle(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then go on as we are
}

}  // namespace

int main(int argc, char** argv) {
  make_openmp_threads_sleep_when_idle(argv);
  CLI::App app{"remat: an autograd engine for efficient training"};
  app.require_subcommand(1);

  bool json = false;
  std::string task;
  remat::train::FashionMnistOptions train_options;
  CLI::App* train = app.add_subcommand("train", "train a model on a task");
  train->add_option("--task", task, "fashion-mnist")->required();
  train->add_option("--epochs", train_options.epochs, "epochs")->capture_default_str();
  train->add_option("--batch-size", train_options.batch_size, "examples per step")->capture_default_str();
  train->add_option("--lr", train_options.lr, "AdamW learning rate")->capture_default_str();
  train->add_option("--weight-decay", train_options.weight_decay, "AdamW decoupled weight decay")->capture_default_str();
  train->add_option("--seed", train_options.seed, "seed of initialisation and shuffling")->capture_default_str();
  train->add_option("--threads", train_options.threads, "CPU threads")->capture_default_str();
  train->add_option("--data-dir", train_options.data_dir, "folder of the IDX .gz files")->capture_default_str();
  train->add_option("--max-batches", train_options.max_batches, "stop each epoch after N batches (0: all)");
  train->add_flag("--json", json, "print JSON lines");

  remat::train::WorkloadOptions bench_options;
  CLI::App* bench = app.add_subcommand("bench", "run a reference workload of WORKLOADS.md and measure it");
  bench->add_option("--workload", bench_options.workload, "W1")->capture_default_str();
  bench->add_option("--policy", bench_options.policy, "checkpointing policy (none)")->capture_default_str();
  bench->add_option("--threads", bench_options.threads, "CPU threads")->capture_default_str();
  bench->add_option("--steps", bench_options.steps, "timed steps")->capture_default_str();
  bench->add_option("--warmup", bench_options.warmup, "untimed steps first")->capture_default_str();
  bench->add_option("--seed", bench_options.seed, "seed of weights and batch")->capture_default_str();
  bench->add_flag("--json", json, "print one JSON line");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*train) run_train(task, train_options, json);
    if (*bench) run_bench(bench_options, json);
  } catch (const remat::Error& e) {
    fmt::print(stderr, "remat: error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {  // e.g. std::bad_alloc
    fmt::print(stderr, "remat: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
