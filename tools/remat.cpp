// remat: the command line program. Parses flags (CLI11) and calls train/;
// no training or measuring logic lives here.
//
//   remat train --task fashion-mnist|kjv-gpt [training flags] [--json]
//   remat bench --workload W1|W2|W3 [--device cuda] [--tf32] --policy none|blocks|sqrt|cost|chain|milp|auto|dtr [--budget 64MiB|50%] [--against none] [--save-profile F | --profile F] [--json]
//   remat explain --workload W1|W2|W3 [--device cuda] --policy P [--budget B] [--format table|csv|json] [--save-profile F | --profile F]
//   remat tradeoff --workload W1|W2|W3 | --model ... [--policies blocks,cost,chain,milp,auto,dtr] [--budgets 25%,50%,...] [--profile F] --out DIR   (CSV, JSON, DOT of blocks and cost)
//   (bench, explain, tradeoff: --model gpt [sizes] | --model mlp --dims 784,1024,10 | --hf DIR instead of --workload)
//
// Each subcommand prints a human table by default and JSON lines with --json.
// Errors from the engine are printed as "remat: error: ..." with exit code 1;
// bad flags are reported by CLI11 with its own non-zero exit codes. The
// ranges of numbers are checked by train/ (train, bench, tradeoff), with
// messages that name the flag and the value.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/mpi.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "kernels/cpu/gemm_library.h"
#include "kernels/cpu/parallel.h"
#if REMAT_HAVE_CUDA
#include "kernels/cuda/gemm.h"
#endif
#include "scheduler/dot.h"
#include "scheduler/profile_json.h"
#include "train/fashion_mnist_task.h"
#include "train/kjv_gpt_task.h"
#include "train/parse.h"
#include "train/progress.h"
#include "train/tradeoff.h"
#include "train/trainer.h"
#include "train/training_arguments.h"
#include "train/workload.h"

namespace {

// remat train and remat bench: --tf32.
constexpr const char* kTf32Help = "TF32 tensor-core math for float32 matrix products on the GPU (cuBLAS's "
                                  "CUBLAS_TF32_TENSOR_OP_MATH, about 1e-3 relative error; off by default, as in "
                                  "PyTorch); no effect on the CPU";

using remat::train::EpochResult;
using remat::train::KjvEval;

// A seed: an integer from 0 to 2^64 - 1, nothing else.
uint64_t parse_seed(const std::string& text, std::string_view flag) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  REMAT_CHECK(!text.empty() && error == std::errc() && end == text.data() + text.size(), "{} must be an integer from "
              "0 to 18446744073709551615, got '{}'", flag, text);
  return value;
}

constexpr const char* kCommands = "train, bench, explain, tradeoff";

// CLI11 says only "A subcommand is required" for `remat foo`: name what was
// given and what there is. Returns whether argv names a command (or asks
// for help).
bool command_given(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "remat: error: no command given; commands: {} (remat --help, remat COMMAND --help)\n",
               kCommands);
    return false;
  }
  const std::string first = argv[1];
  if (first.starts_with("-")) return true;  // --help, or a flag CLI11 reports
  for (const char* command : {"train", "bench", "explain", "tradeoff"}) {
    if (first == command) return true;
  }
  fmt::print(stderr, "remat: error: unknown command '{}'; commands: {} (remat --help, remat COMMAND --help)\n", first,
             kCommands);
  return false;
}

std::string mib(int64_t bytes) { return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

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
  remat::comm::DiLoCoOptions outer;
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

// Only rank 0 of an mpirun job prints headers and summaries.
bool main_process() { return remat::comm::Mpi::launch_rank() == 0; }

// "4 ranks (mpi), LocalSGD every 8 steps, 2 micro-batches per step"
template <class Options>
std::string distribution(const Options& options) {
  const bool mpi = remat::comm::Mpi::launched_by_mpi();
  const int ranks = remat::comm::Mpi::launch_size();
  std::string out = !mpi ? "1 process" : ranks > 0 ? fmt::format("{} ranks (mpi)", ranks) : "mpi";
  if (options.local_sgd_steps > 0) {
    out += fmt::format(", {} every {} steps", options.diloco ? "DiLoCo" : "LocalSGD", options.local_sgd_steps);
    if (options.diloco) out += fmt::format(" (outer lr {}, momentum {})", options.diloco->outer_lr, options.diloco->momentum);
  } else if (mpi) {
    out += ", synchronous data parallel";
  }
  if (options.gradient_accumulation_steps > 1) {
    out += fmt::format(", {} micro-batches per step", options.gradient_accumulation_steps);
  }
  return out;
}

// Sets the threads the task will run (an invalid count is its error) and
// prints "gemm: BLIS 0.9.0, haswell kernels (the CPU's AVX2+FMA, by CPUID), 2 threads".
void set_threads_and_print_gemm(int threads) {
  remat::kernels::cpu::set_num_threads(threads);  // as the task will; an invalid count is its error
  fmt::print("gemm: {}\n", remat::kernels::cpu::gemm_summary());
}

// The device a run trains on, when it is not the CPU: the GPU, driver, CUDA
// and cuBLAS versions (under mpirun each rank takes its local GPU instead).
void print_device(const std::string& name) {
  const remat::Device device = remat::device_from_name(name);
  if (device.is_cuda()) fmt::print("device: {}\n", remat::device_description(device));
}

void train_fashion_mnist(const remat::train::FashionMnistOptions& options, bool json) {
  remat::train::check_options(options);  // before the header
  if (!json && main_process()) {
    fmt::print("task fashion-mnist: MLP 784-{}-10, AdamW lr {}, batch {} per rank, {} epochs, {} threads; {}\n",
               fmt::join(options.hidden, "-"), options.lr, options.batch_size, options.epochs, options.threads,
               distribution(options));
    set_threads_and_print_gemm(options.threads);
    print_device(options.device);
    if (!options.trainer_flags.empty()) fmt::print("trainer arguments: {}\n", fmt::join(options.trainer_flags, " "));
    std::fflush(stdout);
  }
  // A bar on a terminal, a line every 5 s elsewhere (train/progress.h).
  const remat::train::TrainingArguments args = remat::train::trainer_arguments(options);
  remat::train::Progress progress(static_cast<double>(args.per_device_train_batch_size *
                                                      args.gradient_accumulation_steps *
                                                      std::max(1, remat::comm::Mpi::launch_size())));
  // The Trainer prints its dicts ({'epoch': 1.0, 'eval_loss': ...}); after
  // each epoch a line of what remat measured. --json: one JSON line per epoch.
  auto on_epoch = [&](const EpochResult& r) {
    progress.finish();
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
  };
  auto on_progress = [&](int64_t step, int64_t steps, double loss) {
    progress.update(step, steps, loss);
    if (step == steps) progress.finish();
  };
  // The Trainer's dicts on their own lines, between redraws of the bar;
  // with --json only the JSON lines.
  const auto on_log = [&](const remat::train::Metrics& metrics) {
    if (json) return;
    progress.finish();
    fmt::print("{}\n", remat::train::format_metrics(metrics));
    std::fflush(stdout);
  };
  remat::train::train_fashion_mnist(options, on_epoch, on_progress, on_log);
}

void train_kjv_gpt(const remat::train::KjvGptOptions& options, bool json) {
  remat::train::check_options(options);  // before the header
  if (!json && main_process()) {
    const std::string model = options.init_from.empty()
                                  ? fmt::format("GPT {} layers x {} channels, {} heads, context {}, {} head",
                                                options.n_layer, options.n_embd, options.n_head, options.block_size,
                                                options.tie_weights ? "tied" : "untied")
                                  : fmt::format("GPT of {}/config.json", options.init_from);
    fmt::print("task kjv-gpt: {}, batch {} per rank, AdamW lr {}, {} steps{}, {} threads; {}\n", model,
               options.batch_size, options.lr, options.max_steps,
               options.time_limit_seconds > 0 ? fmt::format(" or {} s", options.time_limit_seconds) : std::string(),
               options.threads, distribution(options));
    set_threads_and_print_gemm(options.threads);
    print_device(options.device);
    if (!options.trainer_flags.empty()) fmt::print("trainer arguments: {}\n", fmt::join(options.trainer_flags, " "));
    fmt::print("{:>6} {:>11} {:>9} {:>9} {:>9} {:>8} {:>13} {:>16} {:>16} {:>10}\n", "step", "train_loss", "val_loss",
               "val_ppl", "lr", "seconds", "tokens/s/rank", "peak_activation", "first_step_peak", "allreduce");
    std::fflush(stdout);
  }
  // A bar on a terminal, a line every 5 s elsewhere (train/progress.h), and
  // a row of the table at each validation. --json: one JSON line per row.
  const remat::train::TrainingArguments args = remat::train::trainer_arguments(options);
  remat::train::Progress progress(static_cast<double>(args.per_device_train_batch_size *
                                                      args.gradient_accumulation_steps *
                                                      std::max(1, remat::comm::Mpi::launch_size())));
  auto on_eval = [&](const KjvEval& e) {
    progress.finish();
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
  };
  auto on_step = [&](const remat::train::StepStats& step) {
    if (!json) progress.update(step.step, step.steps, step.mean_loss);
  };
  // The table says what the Trainer's dicts would (they are in
  // --output-dir's trainer_state.json).
  const auto on_log = [](const remat::train::Metrics&) {};
  const remat::train::KjvResult result = remat::train::train_kjv_gpt(options, on_eval, on_step, on_log);
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

void run_bench(const remat::train::WorkloadOptions& options, const std::string& against, bool json) {
  const nlohmann::ordered_json fields = against.empty()
                                            ? remat::train::run_workload(options).to_json()
                                            : remat::train::run_paired_workload(options, against).to_json();
  if (json) {
    fmt::print("{}\n", fields.dump());
    return;
  }
  for (const auto& [key, value] : fields.items()) {
    std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (value.is_number_integer() && key.find("bytes") != std::string::npos) text += " (" + mib(value.get<int64_t>()) + ")";
    if (value.is_array()) {
      std::vector<std::string> items;
      for (const auto& item : value) items.push_back(fmt::format("{:.3f}", item.get<double>()));
      text = fmt::format("[{}]", fmt::join(items, ", "));
    }
    fmt::print("{:<33} {}\n", key, text);
  }
}

// One row per node of the workload's graph: what it costs and what the
// policy decided, and why.
// With options.profile_path, the saved profile is planned instead of
// running the workload; options.save_profile_path: the profile planned from.
void run_explain(const remat::train::WorkloadOptions& options, const std::string& format) {
  const auto [graph, plan] = remat::train::plan_workload(options);
  if (!options.save_profile_path.empty()) remat::scheduler::save_profile(graph, options.save_profile_path);
  if (format == "json") {  // the plan first, then one line per node
    fmt::print("{}\n", nlohmann::json{{"policy", plan.policy}, {"budget", plan.budget ? nlohmann::json(*plan.budget)
                                                                                        : nlohmann::json(nullptr)},
                                       {"signature", fmt::format("{:016x}", graph.signature)},
                                       {"predicted_peak_bytes", plan.predicted.peak_bytes},
                                       {"minimum_peak_bytes", plan.minimum_peak_bytes},
                                       {"minimum_budget_bytes", plan.minimum_budget_bytes},
                                       {"planning_ms", plan.planning_ms},
                                       {"chosen_by", plan.chosen_by},
                                       {"detail", plan.detail},
                                       {"solver", plan.solver ? nlohmann::json(remat::train::solver_json(*plan.solver))
                                                             : nlohmann::json(nullptr)}}.dump());
  }
  if (format == "csv") {
    fmt::print("position,op,block,output_shape,output_bytes,flops,replay_flops,forward_ms,replay_ms,"
               "replay_in_place_ms,ms_per_mib,decision,reason\n");
  } else if (format == "table") {
    fmt::print("{} nodes, {} of outputs, {:.1f} ms of forward, signature {:016x}\n", graph.nodes.size(),
               mib(graph.total_output_bytes()), graph.total_forward_ms(), graph.signature);
    fmt::print("policy {}: keeps {}, drops {}; predicted peak {}, {} replays, {:.1f} ms of recompute; planned in "
               "{:.0f} ms\n", plan.policy, mib(plan.kept_bytes), mib(plan.dropped_bytes),
               mib(plan.predicted.peak_bytes), plan.predicted.replayed_nodes, plan.predicted.recompute_ms,
               plan.planning_ms);
    fmt::print("minimum feasible budget {} bytes ({}; smallest peak {}), from the graph's bytes alone\n",
               plan.minimum_budget_bytes, mib(plan.minimum_budget_bytes), mib(plan.minimum_peak_bytes));
    fmt::print("plan of {}: {}\n", plan.chosen_by, plan.detail);
    if (plan.solver) {
      const remat::scheduler::SolverReport& r = *plan.solver;
      fmt::print("solver (CBC): {}; objective {:.3f} ms of recompute, bound {:.3f} ms, gap {:.2f}%, {:.2f} s, {} "
                 "variables, {} constraints, {} solves\n", r.status, r.objective_ms, r.bound_ms, 100 * r.gap,
                 r.solve_seconds, r.variables, r.constraints, r.solves);
    }
    fmt::print("{:>5} {:<15} {:<16} {:<18} {:>10} {:>9} {:>8} {:>8} {:>9} {:<9} {}\n", "pos", "op", "block",
               "output", "MiB", "MFLOP", "ms", "replay", "ms/MiB", "decision", "reason");
  }
  for (const remat::scheduler::NodeProfile& n : graph.nodes) {
    const double out_mib = static_cast<double>(n.output_bytes) / (1024.0 * 1024.0);
    const char* decision = plan.tags[n.position] == remat::Tag::Keep ? "KEEP" : "RECOMPUTE";
    const bool in_place = plan.predicted.replayed_in_place[static_cast<size_t>(n.position)];
    const std::string reason = plan.reasons[n.position] + (in_place ? "; replays in place over its input" : "");
    // Timed replays (else a replay is priced at forward's time); the table
    // shows the one ms/MiB prices.
    const auto timed = [](double ms) { return ms > 0 ? nlohmann::json(ms) : nlohmann::json(nullptr); };
    const auto csv = [](double ms) { return ms > 0 ? fmt::format("{:.6f}", ms) : std::string(); };
    const bool replay_timed = n.replay_ms > 0 || n.replay_in_place_ms > 0;
    if (format == "json") {
      fmt::print("{}\n", nlohmann::json{{"position", n.position}, {"op", n.op}, {"block", n.block},
                                         {"output_shape", n.output_shape}, {"output_bytes", n.output_bytes},
                                         {"flops", n.flops}, {"replay_flops", n.replay_flops},
                                         {"forward_ms", n.forward_ms},
                                         {"replay_ms", timed(n.replay_ms)},
                                         {"replay_in_place_ms", timed(n.replay_in_place_ms)},
                                         {"ms_per_mib", n.output_bytes ? nlohmann::json(n.ms_per_mib()) : nullptr},
                                         {"decision", decision}, {"replays_in_place", in_place}, {"reason", reason}}.dump());
    } else if (format == "csv") {
      fmt::print("{},{},{},\"{}\",{},{},{},{:.6f},{},{},{:.6f},{},\"{}\"\n", n.position, n.op, n.block,
                 remat::str(n.output_shape), n.output_bytes, n.flops, n.replay_flops, n.forward_ms, csv(n.replay_ms),
                 csv(n.replay_in_place_ms), n.ms_per_mib(), decision, reason);
    } else {
      fmt::print("{:>5} {:<15} {:<16} {:<18} {:>10.3f} {:>9.2f} {:>8.3f} {:>8} {:>9.3f} {:<9} {}\n", n.position,
                 n.op, n.block, remat::str(n.output_shape), out_mib, static_cast<double>(n.flops) / 1e6, n.forward_ms,
                 replay_timed ? fmt::format("{:.3f}", n.priced_replay_ms()) : "-", n.ms_per_mib(), decision, reason);
    }
  }
}

// "0.25,0.5" or "25%,50%" -> {0.25, 0.5}; the range is checked by sweep_tradeoff.
std::vector<double> parse_fractions(const std::string& text) {
  std::vector<double> fractions;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const bool percent = !item.empty() && item.back() == '%';
    const size_t digits = item.size() - (percent ? 1 : 0);
    double value = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + digits, value);
    REMAT_CHECK(digits > 0 && error == std::errc() && end == item.data() + digits,
                "tradeoff --budgets/--fractions: '{}' in '{}' is not a number or a percentage (example: 0.25,0.5 or "
                "25%,50%)",
                item, text);
    fractions.push_back(percent ? value / 100 : value);
    if (comma == std::string::npos) return fractions;
    start = comma + 1;
  }
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  file.close();
  REMAT_CHECK(file.good(), "tradeoff: cannot write {}", path.string());
}

// The sweep, its files, and a table of what it measured; progress on stderr.
void run_tradeoff(remat::train::TradeoffOptions options, const std::string& out_dir) {
  namespace fs = std::filesystem;
  const fs::path out(out_dir);
  std::error_code error;
  fs::create_directories(out, error);
  REMAT_CHECK(!error && fs::is_directory(out), "tradeoff --out: cannot create folder '{}' ({})", out_dir,
              error ? error.message() : "not a folder");
  options.progress = [](const std::string& line) {
    fmt::print(stderr, "{}\n", line);
    std::fflush(stderr);
  };
  const std::vector<remat::train::TradeoffRow> rows = remat::train::sweep_tradeoff(options);
  write_file(out / "tradeoff.csv", remat::train::tradeoff_csv(rows));
  write_file(out / "tradeoff.json", remat::train::tradeoff_json(rows).dump(2) + "\n");
  std::vector<std::string> written{(out / "tradeoff.csv").string(), (out / "tradeoff.json").string()};
  for (const char* policy : {"blocks", "cost"}) {
    fmt::print(stderr, "planning {} {} for graph_{}.dot ...\n", remat::train::describe(options.model, options.workload),
               policy, policy);
    const auto [graph, plan] = remat::train::plan_workload(
        {.workload = options.workload, .policy = policy, .threads = options.threads, .warmup = 1, .seed = options.seed,
         .device = options.device, .profile_path = options.profile_path, .model = options.model});
    const fs::path path = out / fmt::format("graph_{}.dot", policy);
    write_file(path, remat::scheduler::to_dot(graph, plan));
    written.push_back(path.string());
  }

  fmt::print("{} trade-off on {}, {} thread(s), median of {} step(s) after {} warm-up(s)\n",
             remat::train::describe(options.model, options.workload),
             options.device, options.threads, options.steps, options.warmup);
  fmt::print("{:<8} {:>10} {:>10} {:>10} {:>9} {:>6} {:>8} {:>7}\n", "policy", "budget", "peak", "predicted", "step_ms",
             "x_all", "replays", "pareto");
  auto in_mib = [](std::optional<int64_t> bytes) {
    return bytes ? fmt::format("{:.2f}", static_cast<double>(*bytes) / (1024.0 * 1024.0)) : std::string("-");
  };
  for (const remat::train::TradeoffRow& row : rows) {
    const remat::train::WorkloadReport& r = row.report;
    if (!row.ran()) {
      fmt::print("{:<8} {:>10} skipped: {}\n", r.policy, in_mib(r.budget), row.skipped);
      continue;
    }
    fmt::print("{:<8} {:>10} {:>10} {:>10} {:>9.1f} {:>6.2f} {:>8} {:>7}\n", r.policy, in_mib(r.budget),
               in_mib(r.peak_activation_bytes), in_mib(r.predicted_peak_activation_bytes), r.step_ms_median,
               row.time_vs_keep_all, r.replayed_nodes, row.pareto ? "*" : "");
  }
  fmt::print("(MiB; peak is measured by the allocator, predicted by the liveness simulator)\n");
  fmt::print("wrote {}\n", fmt::join(written, ", "));
  fmt::print("plot:   /usr/bin/python3 tools/plot_tradeoff.py {} -o {}\n", (out / "tradeoff.csv").string(),
             (out / "tradeoff.svg").string());
  fmt::print("graphs: dot -Tsvg {} -o {}\n", (out / "graph_cost.dot").string(), (out / "graph_cost.svg").string());
}

// A model of the user's instead of a --workload preset (train/workload.h):
// its flags, and after parsing, the check that they fit the --model given.
struct ModelFlags {
  std::string head = "untied";
  std::vector<CLI::Option*> gpt, mlp;
  CLI::Option* model = nullptr;
  CLI::Option* hf = nullptr;
};

void add_model_options(CLI::App* command, remat::train::ModelSpec& spec, ModelFlags& flags) {
  flags.model = command->add_option("--model", spec.kind, "a model of your own instead of --workload: gpt or mlp")
                    ->check(CLI::IsMember({"gpt", "mlp"}));
  flags.hf = command->add_option("--hf", spec.hf_dir, "a Hugging Face GPT-2 folder (config.json, model.safetensors) "
                                 "instead of --workload");
  command->add_option("--batch-size", spec.batch_size, "with --model or --hf: rows (sequences) per batch")
      ->capture_default_str();
  flags.gpt = {command->add_option("--n-layer", spec.gpt.n_layer, "--model gpt: blocks")->capture_default_str(),
               command->add_option("--n-embd", spec.gpt.n_embd, "--model gpt: channels")->capture_default_str(),
               command->add_option("--n-head", spec.gpt.n_head, "--model gpt: heads")->capture_default_str(),
               command->add_option("--block-size", spec.gpt.block_size, "--model gpt: context")->capture_default_str(),
               command->add_option("--vocab-size", spec.gpt.vocab_size, "--model gpt: vocabulary")->capture_default_str(),
               command->add_option("--dropout", spec.gpt.dropout, "--model gpt: dropout")->capture_default_str(),
               command->add_option("--head", flags.head, "--model gpt: tied or untied")
                   ->check(CLI::IsMember({"tied", "untied"}))->capture_default_str()};
  flags.mlp = {command->add_option("--dims", spec.dims, "--model mlp: widths, input to classes (784,1024,1024,10)")
                   ->delimiter(',')};
}

void finish_model_spec(const CLI::App* app, remat::train::ModelSpec& spec, const ModelFlags& flags) {
  const std::string command = app->get_name();
  if (flags.hf->count() > 0) {
    REMAT_CHECK(flags.model->count() == 0, "{}: give --model or --hf, not both", command);
    spec.kind = "hf";
  }
  REMAT_CHECK(spec.kind.empty() || app->get_option("--workload")->count() == 0, "{}: give --workload or a model of "
              "your own (--model, --hf), not both", command);
  REMAT_CHECK(!spec.kind.empty() || app->get_option("--batch-size")->count() == 0, "{}: --batch-size is a flag of "
              "--model and --hf (a --workload has its own batch)", command);
  spec.gpt.tie_weights = flags.head == "tied";
  for (const auto& [kind, options] : {std::pair{"gpt", &flags.gpt}, std::pair{"mlp", &flags.mlp}}) {
    for (const CLI::Option* option : *options) {
      REMAT_CHECK(option->count() == 0 || spec.kind == kind, "{}: {} is a flag of --model {}{}", command,
                  option->get_name(), kind, spec.kind.empty() ? "" : fmt::format(", not of --model {}", spec.kind));
    }
  }
}

// train --model / --hf: which task, and its model's flags.
struct TrainModelFlags {
  std::string model, hf, head;
  std::vector<int64_t> dims;
  bool model_given, hf_given, dims_given, head_given;
};

void resolve_train_model(std::string& task, const TrainModelFlags& f, remat::train::FashionMnistOptions& mnist,
                         remat::train::KjvGptOptions& kjv) {
  REMAT_CHECK(!(f.model_given && f.hf_given), "train: give --model or --hf, not both");
  std::string implied;
  if (f.model == "mlp") implied = "fashion-mnist";
  if (f.model == "gpt" || f.hf_given) implied = "kjv-gpt";
  if (!implied.empty()) {
    const std::string given = f.hf_given ? "--hf" : "--model " + f.model;
    REMAT_CHECK(task.empty() || task == implied, "train: {} trains task {}, not --task {}", given, implied, task);
    task = implied;
  }
  REMAT_CHECK(!task.empty(), "train: give --task fashion-mnist|kjv-gpt, --model gpt|mlp, or --hf DIR");
  REMAT_CHECK(!f.dims_given || task == "fashion-mnist", "train: --dims is a flag of --model mlp (task "
              "fashion-mnist), not of task {}", task);
  REMAT_CHECK(!f.head_given || task == "kjv-gpt", "train: --head is a flag of --model gpt (task kjv-gpt), not of "
              "task {}", task);
  if (f.hf_given) {
    REMAT_CHECK(kjv.init_from.empty(), "train: --hf and --init-from name the same thing; give one");
    kjv.init_from = f.hf;
  }
  kjv.tie_weights = f.head == "tied";
  if (f.dims_given) {
    REMAT_CHECK(f.dims.size() >= 2 && f.dims.front() == 784 && f.dims.back() == 10, "train --model mlp: --dims {} "
                "must run from 784 (fashion-mnist's pixels) to 10 (its classes), e.g. 784,1024,1024,10",
                fmt::join(f.dims, ","));
    mnist.hidden.assign(f.dims.begin() + 1, f.dims.end() - 1);
  }
}

// "50%" -> 0.5, for bench --budget.
double parse_percent(const std::string& text, std::string_view what) {
  double value = 0;
  const std::string_view number(text.data(), text.size() - 1);
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
  REMAT_CHECK(error == std::errc() && end == number.data() + number.size() && value > 0 && value <= 100,
              "{}: '{}' is not a share of keep-all's peak in (0, 100]% (examples: 25%, 50%)", what, text);
  return value / 100;
}

// The options bench and explain share: which workload, and how to plan it.
void add_plan_options(CLI::App* command, remat::train::WorkloadOptions& options, std::string& budget) {
  command->add_option("--workload", options.workload, "W1, W2, or W3 (GPT-2 124M, --device cuda)")->capture_default_str();
  command->add_option("--device", options.device, "cpu, or cuda[:N] (the CUDA kernels: not yet run on a GPU)")
      ->capture_default_str();
  command->add_option("--policy", options.policy, "recompute policy: none, blocks, sqrt, cost, chain, milp, auto or "
                      "dtr")->capture_default_str();
  command->add_option("--budget", budget, "peak activation bytes for cost, chain, milp, auto or dtr, e.g. 64MiB, or "
                      "50% (a share of keep-all's peak)");
  command->add_option("--must-keep", options.overrides.must_keep, "ops whose outputs every plan keeps, e.g. gelu")
      ->delimiter(',');
  command->add_option("--must-recompute", options.overrides.must_recompute,
                      "ops whose outputs every plan replays, e.g. layer_norm")->delimiter(',');
  command->add_option("--solver-time-limit", options.solver_time_limit_s, "milp: seconds per plan for CBC (the best "
                      "plan found by then, with its bound and gap)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
}

// OpenMP threads that spin while idle take the cores from whatever else
// runs beside them: other ranks under mpirun, other programs (with
// OpenBLAS's threads beside them, a 2-thread training run was 3x slower).
// GEMM and remat's loops share one OpenMP pool (Note [GEMM library]), and
// sleeping waits cost W1 and W2 about 2% at 2 threads on an idle 2-core
// machine (docs/gemm.md). libgomp reads OMP_WAIT_POLICY
// when it loads, before main(), so the program sets it and runs itself
// again, once.
void make_openmp_threads_sleep_when_idle(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then go on as we are
}

}  // namespace

int main(int argc, char** argv) {
  make_openmp_threads_sleep_when_idle(argv);
  if (!command_given(argc, argv)) return 1;
  CLI::App app{"remat: an autograd engine for efficient training"};
  app.require_subcommand(1);
  // The version and the GEMM this program runs (Note [GEMM library]); the
  // Python module's remat.gemm_summary() and programs built against the
  // installed package say the same (tests/package/).
  app.set_version_flag("--version", [] {
    return fmt::format("remat {}\ngemm: {}", REMAT_VERSION, remat::kernels::cpu::gemm_summary());
  });
  bool json = false;

  std::string task;
  CommonFlags common;
  remat::train::FashionMnistOptions mnist;
  remat::train::KjvGptOptions kjv;
  CLI::App* train = app.add_subcommand("train", "train a model on a task; other --flags are Trainer arguments by "
                                       "Hugging Face's names (train/training_arguments.h), e.g. --eval-strategy epoch "
                                       "--gradient-checkpointing --output-dir results");
  train->allow_extras();
  bool train_tf32 = false;
  train->add_flag("--tf32", train_tf32, kTf32Help);
  train->add_option("--task", task, "fashion-mnist or kjv-gpt (or give --model or --hf)")
      ->check(CLI::IsMember({"fashion-mnist", "kjv-gpt"}));
  // A model of the user's: --model mlp is fashion-mnist's MLP of those widths,
  // --model gpt (with kjv-gpt's sizes) and --hf DIR are kjv-gpt's GPT.
  std::string train_model, train_hf, train_head = "tied";
  std::vector<int64_t> train_dims;
  CLI::Option* train_model_flag = train->add_option("--model", train_model, "gpt (task kjv-gpt, sized by --n-layer ...) "
                                                    "or mlp (task fashion-mnist, sized by --dims)")
                                      ->check(CLI::IsMember({"gpt", "mlp"}));
  CLI::Option* train_hf_flag = train->add_option("--hf", train_hf, "task kjv-gpt from a Hugging Face GPT-2 folder (the "
                                                 "same as --init-from DIR)");
  CLI::Option* train_dims_flag = train->add_option("--dims", train_dims, "--model mlp: widths, 784 (the pixels) to 10 "
                                                   "(the classes), e.g. 784,1024,1024,10 (784,256,256,10)")
                                     ->delimiter(',');
  CLI::Option* train_head_flag = train->add_option("--head", train_head, "--model gpt: tied or untied lm_head "
                                                   "(tied, as GPT-2; bench's --model gpt is untied, as W2)")
                                     ->check(CLI::IsMember({"tied", "untied"}))->capture_default_str();
  train->add_option("--batch-size", common.batch_size, "examples per step (fashion-mnist 64, kjv-gpt 32)");
  train->add_option("--lr", common.lr, "AdamW peak learning rate (fashion-mnist 2e-3, kjv-gpt 3e-3)");
  train->add_option("--weight-decay", common.weight_decay, "AdamW decoupled weight decay (1e-2, 0.1)");
  train->add_option("--seed", common.seed, "seed of initialisation, shuffling and sampling (0)");
  train->add_option("--threads", common.threads, "CPU threads per process (2)");
  train->add_option("--device", common.device, "cpu, or cuda[:N] (under mpirun: each rank its local GPU, NCCL; the "
                    "CUDA kernels have not yet run on a GPU)")->capture_default_str();
  train->add_option("--gradient-accumulation-steps", common.gradient_accumulation_steps,
                    "micro-batches per optimizer step")->capture_default_str();
  train->add_option("--local-sgd-steps", common.local_sgd_steps,
                    "under mpirun: optimizer steps between parameter averages (0: synchronous data parallel)")
      ->capture_default_str();
  train->add_flag("--diloco", common.diloco, "with --local-sgd-steps: DiLoCo's outer Nesterov step at each average");
  CLI::Option* diloco = train->get_option("--diloco");
  train->add_option("--outer-lr", common.outer.outer_lr, "DiLoCo's outer learning rate")->capture_default_str()
      ->needs(diloco);
  train->add_option("--outer-momentum", common.outer.momentum, "DiLoCo's outer momentum")->capture_default_str()
      ->needs(diloco);
  std::vector<CLI::Option*> mnist_only, kjv_only;
  mnist_only.push_back(train->add_option("--epochs", mnist.epochs, "fashion-mnist: epochs")->capture_default_str());
  mnist_only.push_back(train->add_option("--data-dir", mnist.data_dir, "fashion-mnist: folder of the IDX .gz files")
                           ->capture_default_str());
  mnist_only.push_back(
      train->add_option("--max-batches", mnist.max_batches, "fashion-mnist: stop each epoch after N batches (0: all)"));
  kjv_only.push_back(train->add_option("--max-steps", kjv.max_steps, "kjv-gpt: optimizer steps")->capture_default_str());
  kjv_only.push_back(train->add_option("--time-limit", kjv.time_limit_seconds, "kjv-gpt: stop after this many seconds (0: none)")
      ->capture_default_str());
  kjv_only.push_back(train->add_option("--n-layer", kjv.n_layer, "kjv-gpt: blocks")->capture_default_str());
  kjv_only.push_back(train->add_option("--n-head", kjv.n_head, "kjv-gpt: attention heads")->capture_default_str());
  kjv_only.push_back(train->add_option("--n-embd", kjv.n_embd, "kjv-gpt: channels")->capture_default_str());
  kjv_only.push_back(train->add_option("--block-size", kjv.block_size, "kjv-gpt: context length")->capture_default_str());
  kjv_only.push_back(train->add_option("--dropout", kjv.dropout, "kjv-gpt: dropout probability")->capture_default_str());
  kjv_only.push_back(train->add_option("--checkpointing", kjv.checkpointing,
                                       "kjv-gpt: activation checkpointing policy (blocks, sqrt, cost, chain, milp, auto, dtr)"));
  std::string kjv_budget;
  kjv_only.push_back(train->add_option("--checkpointing-budget", kjv_budget,
                                       "kjv-gpt: peak activation bytes for cost, chain, milp, auto or dtr, e.g. 32MiB"));
  kjv_only.push_back(train->add_option("--checkpointing-profile", kjv.checkpointing_profile,
                                       "kjv-gpt: plan the first step from this saved profile (the budget holds from "
                                       "it)"));
  kjv_only.push_back(train->add_option("--save-checkpointing-profile", kjv.save_checkpointing_profile,
                                       "kjv-gpt: write the graph's profile here at the end, for --checkpointing-profile"));
  kjv_only.push_back(train->add_option("--warmup-steps", kjv.warmup_steps, "kjv-gpt: linear warm-up steps")->capture_default_str());
  kjv_only.push_back(train->add_option("--eval-interval", kjv.eval_interval, "kjv-gpt: steps between validation losses")
      ->capture_default_str());
  kjv_only.push_back(train->add_option("--eval-batches", kjv.eval_batches, "kjv-gpt: validation batches per measurement")
      ->capture_default_str());
  kjv_only.push_back(train->add_option("--sample-chars", kjv.sample_chars, "kjv-gpt: characters to generate at the end")
      ->capture_default_str());
  kjv_only.push_back(train->add_option("--temperature", kjv.temperature, "kjv-gpt: sampling temperature")->capture_default_str());
  kjv_only.push_back(train->add_option("--prompt", kjv.prompt, "kjv-gpt: text the sample starts from")->capture_default_str());
  kjv_only.push_back(train->add_option("--text", kjv.text_path, "kjv-gpt: train on this text file instead of the KJV"));
  kjv_only.push_back(train->add_option("--save-weights", kjv.weights_path, "kjv-gpt: write the trained model here as a "
                                       "Hugging Face GPT-2 folder (config.json, model.safetensors)"));
  kjv_only.push_back(train->add_option("--init-from", kjv.init_from, "kjv-gpt: start from the weights of a Hugging "
                                       "Face GPT-2 folder (its configuration replaces the model flags)"));
  train->add_flag("--json", json, "print JSON lines");

  remat::train::WorkloadOptions bench_options;
  CLI::App* bench = app.add_subcommand("bench", "run a reference workload (docs/workloads.md) and measure it");
  std::string bench_budget;
  add_plan_options(bench, bench_options, bench_budget);
  ModelFlags bench_model;
  add_model_options(bench, bench_options.model, bench_model);
  bench->add_option("--threads", bench_options.threads, "CPU threads")->capture_default_str();
  bench->add_option("--steps", bench_options.steps, "timed steps")->capture_default_str();
  bench->add_option("--warmup", bench_options.warmup, "untimed steps first")->capture_default_str();
  std::string bench_seed;
  bench->add_option("--seed", bench_seed, "seed of weights and batch (0)");
  bench->add_flag("--json", json, "print one JSON line");
  bool bench_tf32 = false;
  bench->add_flag("--tf32", bench_tf32, kTf32Help);
  bench->add_option("--trace", bench_options.trace_path, "write the last step's memory timeline (Chrome trace JSON)");
  bench->add_option("--profile", bench_options.profile_path, "plan every step from this saved profile (JSON; the "
                    "same plan on every run and machine)");
  bench->add_option("--save-profile", bench_options.save_profile_path, "write the profile the plan was made from (JSON)");
  std::string against;
  bench->add_option("--against", against, "also run a copy under this policy (e.g. none), alternating steps, and "
                    "report the per-step time ratios");

  remat::train::WorkloadOptions explain_options{.warmup = 1};
  std::string format = "table";
  CLI::App* explain = app.add_subcommand("explain", "one row per node of a workload's graph: cost and decision");
  std::string explain_budget;
  add_plan_options(explain, explain_options, explain_budget);
  ModelFlags explain_model;
  add_model_options(explain, explain_options.model, explain_model);
  explain->add_option("--threads", explain_options.threads, "CPU threads")->capture_default_str();
  explain->add_option("--format", format, "table, csv or json")->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();
  explain->add_option("--profile", explain_options.profile_path,
                      "plan this saved profile (JSON) instead of running the workload");
  explain->add_option("--save-profile", explain_options.save_profile_path, "write the profile planned from (JSON)");

  remat::train::TradeoffOptions tradeoff_options;
  std::string fractions, out_dir;
  CLI::App* tradeoff = app.add_subcommand(
      "tradeoff", "sweep recompute policies and budgets on a workload: peak memory against step time");
  tradeoff->add_option("--workload", tradeoff_options.workload, "W1, W2, or W3 (GPT-2 124M, --device cuda)")
      ->capture_default_str();
  ModelFlags tradeoff_model;
  add_model_options(tradeoff, tradeoff_options.model, tradeoff_model);
  tradeoff->add_option("--device", tradeoff_options.device, "cpu, or cuda[:N] (the CUDA kernels: not yet run on a GPU)")
      ->capture_default_str();
  tradeoff->add_option("--threads", tradeoff_options.threads, "CPU threads")->capture_default_str();
  tradeoff->add_option("--steps", tradeoff_options.steps, "timed steps per run")->capture_default_str();
  tradeoff->add_option("--rounds", tradeoff_options.rounds, "interleaved repeats of the sweep (median step time)")
      ->capture_default_str();
  tradeoff->add_flag("--paired", tradeoff_options.paired, "time each run against a keep-all copy stepped alternately "
                     "(the median of per-step ratios)");
  tradeoff->add_option("--warmup", tradeoff_options.warmup, "untimed steps first per run (at least 1)")
      ->capture_default_str();
  std::string tradeoff_seed;
  tradeoff->add_option("--seed", tradeoff_seed, "seed of weights and batch (0)");
  tradeoff->add_option("--policies", tradeoff_options.policies, "policies swept after keep-all, e.g. "
                       "blocks,sqrt,cost,chain,milp,auto,dtr")->delimiter(',')->capture_default_str();
  CLI::Option* budgets = tradeoff->add_option("--budgets", fractions, "budgets of the policies that take one, as "
                                              "shares of keep-all's peak: 25%,50% or 0.25,0.5 "
                                              "(25%,35%,50%,60%,75%,90%)");
  tradeoff->add_option("--fractions", fractions, "the same as --budgets (its older name)")->excludes(budgets);
  tradeoff->add_option("--solver-time-limit", tradeoff_options.solver_time_limit_s, "milp: seconds per plan for CBC")
      ->capture_default_str()->check(CLI::Range(0.001, 86400.0));
  tradeoff->add_option("--profile", tradeoff_options.profile_path, "plan every run from this saved profile (JSON, "
                       "from bench or explain --save-profile): the same plans on every sweep");
  tradeoff->add_option("--out", out_dir, "folder for tradeoff.csv, tradeoff.json and graph_<policy>.dot")->required();

  CLI11_PARSE(app, argc, argv);
  try {
    // A flag of the other task would be silently ignored: say so instead.
    // kjv-gpt's flags that are Trainer arguments too (--max-steps,
    // --warmup-steps) go to fashion-mnist's Trainer.
    if (*train) {
      resolve_train_model(task, {.model = train_model, .hf = train_hf, .head = train_head, .dims = train_dims,
                                 .model_given = train_model_flag->count() > 0, .hf_given = train_hf_flag->count() > 0,
                                 .dims_given = train_dims_flag->count() > 0, .head_given = train_head_flag->count() > 0},
                          mnist, kjv);
    }
    std::vector<std::string> trainer_flags;
    for (const auto& [owner, flags] : {std::pair{"kjv-gpt", &kjv_only}, std::pair{"fashion-mnist", &mnist_only}}) {
      if (!*train || task == owner) continue;
      for (const CLI::Option* flag : *flags) {
        if (flag->count() == 0) continue;
        const std::string name = flag->get_name();
        REMAT_CHECK(task == "fashion-mnist" && remat::train::is_training_argument(name.substr(2)), "train: {} is a "
                    "flag of --task {}, not of --task {}", name, owner, task);
        for (const std::string& value : flag->results()) trainer_flags.insert(trainer_flags.end(), {name, value});
      }
    }
    // What CLI11 does not know goes to the Trainer, by Hugging Face's names
    // (--eval-strategy epoch, --gradient-checkpointing, --output-dir DIR).
    for (const std::string& flag : train->remaining()) trainer_flags.push_back(flag);
    if (train_tf32) trainer_flags.push_back("--tf32");  // TrainingArguments' tf32
    if (*train && task == "fashion-mnist") {
      apply(common, mnist);
      mnist.trainer_flags = trainer_flags;
      train_fashion_mnist(mnist, json);
    }
    if (*train && task == "kjv-gpt") {
      if (!kjv.init_from.empty()) {
        for (const char* flag : {"--n-layer", "--n-head", "--n-embd", "--block-size", "--dropout", "--head"}) {
          REMAT_CHECK(train->get_option(flag)->count() == 0, "train: {} and --init-from: the model's configuration "
                      "is the folder's ({}/config.json); leave {} out", flag, kjv.init_from, flag);
        }
      }
      apply(common, kjv);
      kjv.trainer_flags = trainer_flags;
      if (!kjv_budget.empty()) kjv.checkpointing_budget = remat::train::parse_bytes(kjv_budget, "--checkpointing-budget");
      train_kjv_gpt(kjv, json);
    }
    if (!bench_seed.empty()) bench_options.seed = parse_seed(bench_seed, "bench --seed");
    if (!tradeoff_seed.empty()) tradeoff_options.seed = parse_seed(tradeoff_seed, "tradeoff --seed");
    if (!bench_budget.empty() && bench_budget.ends_with('%')) {
      // A share of keep-all's measured peak (train/workload.h, budget_fraction).
      bench_options.budget_fraction = parse_percent(bench_budget, "bench --budget");
    } else if (!bench_budget.empty()) {
      bench_options.budget = remat::train::parse_bytes(bench_budget, "bench --budget");
    }
    if (*bench) finish_model_spec(bench, bench_options.model, bench_model);
    if (*explain) finish_model_spec(explain, explain_options.model, explain_model);
    if (!explain_budget.empty() && explain_budget.ends_with('%')) {
      explain_options.budget_fraction = parse_percent(explain_budget, "explain --budget");
    } else if (!explain_budget.empty()) {
      explain_options.budget = remat::train::parse_bytes(explain_budget, "explain --budget");
    }
    if (*tradeoff) finish_model_spec(tradeoff, tradeoff_options.model, tradeoff_model);
    if (*bench && bench_tf32) {
#if REMAT_HAVE_CUDA
      remat::kernels::cuda::set_allow_tf32(true);
#endif
    }
    if (*bench) run_bench(bench_options, against, json);
    if (*explain) run_explain(explain_options, format);
    if (!fractions.empty()) tradeoff_options.budget_fractions = parse_fractions(fractions);
    if (*tradeoff) run_tradeoff(tradeoff_options, out_dir);
  } catch (const std::exception& e) {  // remat::Error, and e.g. std::bad_alloc
    fmt::print(stderr, "remat: error{}: {}\n",
               remat::comm::Mpi::launched_by_mpi() ? fmt::format(" on rank {}", remat::comm::Mpi::launch_rank()) : "",
               e.what());
    // The other ranks would wait for this one in their next collective.
    if (remat::comm::Mpi::launched_by_mpi()) remat::comm::Mpi::abort_job(1);
    return 1;
  }
  return 0;
}
