// remat tradeoff: sweep recompute policies and budgets on a workload (or a
// model of the user's) and write tradeoff.csv, tradeoff.json and the DOT
// graphs of blocks and cost into --out, with a table of what it measured;
// progress on stderr. With --memory-limit and --batch-sizes, the batch
// sweep instead: batches.csv and batches.json, a table, and the fastest
// configuration that fits. The sweeps themselves are workloads/tradeoff.h's
// and workloads/batch_sweep.h's.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "engine/error.h"
#include "engine/file_write.h"
#include "scheduler/dot.h"
#include "scheduler/plan.h"
#include "tools/command.h"
#include "workloads/batch_sweep.h"
#include "train/parse.h"
#include "workloads/tradeoff.h"

namespace remat::tools {
namespace {

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

// --out, made if it is not there.
std::filesystem::path make_out_dir(const std::string& out_dir) {
  namespace fs = std::filesystem;
  const fs::path out(out_dir);
  std::error_code error;
  fs::create_directories(out, error);
  REMAT_CHECK(!error && fs::is_directory(out), "tradeoff --out: cannot create folder '{}' ({})", out_dir,
              error ? error.message() : "not a folder");
  return out;
}

// graph_blocks.dot and graph_cost.dot: the graph with each plan's tags.
void write_graphs(const workloads::TradeoffOptions& options, const std::filesystem::path& out,
                  std::vector<std::string>& written) {
  for (const char* policy : {"blocks", "cost"}) {
    fmt::print(stderr, "planning {} {} for graph_{}.dot ...\n", workloads::describe(options.model, options.workload),
               policy, policy);
    const auto [graph, plan] = workloads::plan_workload(
        {.workload = options.workload, .policy = policy, .threads = options.threads, .warmup = 1, .seed = options.seed,
         .device = options.device, .profile_path = options.profile_path, .model = options.model});
    const std::filesystem::path path = out / fmt::format("graph_{}.dot", policy);
    write_file_atomically(path.string(), scheduler::to_dot(graph, plan));
    written.push_back(path.string());
  }
}

// The table of what the sweep measured, and how to plot it.
void print_rows(const workloads::TradeoffOptions& options, const std::vector<workloads::TradeoffRow>& rows,
                const std::filesystem::path& out, const std::vector<std::string>& written) {
  int warmup = options.warmup;  // or more: the steps until a run's plan was final
  for (const workloads::TradeoffRow& row : rows) warmup = std::max(warmup, row.report.warmup);
  fmt::print("{} trade-off on {}, {} thread(s), median of {} step(s) after {} warm-up(s)\n",
             workloads::describe(options.model, options.workload), options.device, options.threads, options.steps,
             warmup);
  fmt::print("{:<8} {:>10} {:>10} {:>10} {:>9} {:>6} {:>8} {:>7}\n", "policy", "budget", "peak", "predicted", "step_ms",
             "x_all", "replays", "pareto");
  auto in_mib = [](std::optional<int64_t> bytes) {
    return bytes ? fmt::format("{:.2f}", static_cast<double>(*bytes) / (1024.0 * 1024.0)) : std::string("-");
  };
  for (const workloads::TradeoffRow& row : rows) {
    const workloads::WorkloadReport& r = row.report;
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

// The sweep, its files, and a table of what it measured; progress on stderr.
void run_tradeoff(workloads::TradeoffOptions options, const std::string& out_dir) {
  const std::filesystem::path out = make_out_dir(out_dir);
  options.progress = [](const std::string& line) {
    fmt::print(stderr, "{}\n", line);
    std::fflush(stderr);
  };
  const std::vector<workloads::TradeoffRow> rows = workloads::sweep_tradeoff(options);
  write_file_atomically((out / "tradeoff.csv").string(), workloads::tradeoff_csv(rows));
  write_file_atomically((out / "tradeoff.json").string(), workloads::tradeoff_json(rows).dump(2) + "\n");
  std::vector<std::string> written{(out / "tradeoff.csv").string(), (out / "tradeoff.json").string()};
  write_graphs(options, out, written);
  print_rows(options, rows, out, written);
}

// "8,16,32" -> {8, 16, 32}; each a whole number (sweep_batches checks the range).
std::vector<int64_t> parse_batch_sizes(const std::string& text) {
  std::vector<int64_t> sizes;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int64_t value = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    REMAT_CHECK(!item.empty() && error == std::errc() && end == item.data() + item.size(), "tradeoff --batch-sizes: "
                "'{}' in '{}' is not a whole number (example: 8,16,32,64)", item, text);
    sizes.push_back(value);
    if (comma == std::string::npos) return sizes;
    start = comma + 1;
  }
}

std::string in_mib(std::optional<int64_t> bytes) {
  return bytes ? fmt::format("{:.2f}", static_cast<double>(*bytes) / (1024.0 * 1024.0)) : std::string("-");
}

// The batch sweep's table, each policy's fastest fitting batch, and how to plot it.
void print_batches(const workloads::BatchSweepOptions& options, const workloads::BatchSweep& sweep,
                   const std::filesystem::path& out) {
  fmt::print("batch sweep of {} under a memory limit of {} MiB, {}, {} thread(s), median of {} step(s) after {} "
             "warm-up(s)\n", sweep.model, in_mib(sweep.memory_limit), options.device, options.threads, options.steps,
             options.warmup);
  fmt::print("{:>6} {:<8} {:>10} {:>9} {:>10} {:>10} {:>9} {:>10} {:<5}\n", "batch", "policy", "budget", "resident",
             "peak", "peak_act", "step_ms", "samples/s", "fits");
  for (const workloads::BatchRow& row : sweep.rows) {
    const workloads::WorkloadReport* r = row.report ? &*row.report : nullptr;
    fmt::print("{:>6} {:<8} {:>10} {:>9} {:>10} {:>10} {:>9} {:>10} {:<5}{}\n", row.batch_size, row.policy,
               in_mib(row.budget), in_mib(row.resident_bytes), in_mib(r ? std::optional(r->peak_total_bytes) : std::nullopt),
               in_mib(r ? std::optional(r->peak_activation_bytes) : std::nullopt),
               r ? fmt::format("{:.1f}", r->step_ms_median) : "-", r ? fmt::format("{:.1f}", row.samples_per_s) : "-",
               row.fits ? "yes" : "no", row.fastest ? " *" : "");
    if (!r) fmt::print("{:>6} {}\n", "", row.reason);
  }
  fmt::print("(MiB; peak: every byte the allocator held at the step's peak, parameters, gradients, optimizer state, "
             "batch and activations; resident: all but the activations; * the fastest fitting batch of its policy)\n");
  for (const std::string& policy : options.policies) {
    const auto best = std::find_if(sweep.rows.begin(), sweep.rows.end(),
                                   [&](const workloads::BatchRow& row) { return row.policy == policy && row.fastest; });
    if (best == sweep.rows.end()) {
      fmt::print("no batch fits under {}\n", policy);
    } else {
      fmt::print("fastest that fits under {}: batch {}, {:.1f} samples/s\n", policy, best->batch_size,
                 best->samples_per_s);
    }
  }
  if (sweep.fastest) {
    const workloads::BatchRow& best = sweep.rows[*sweep.fastest];
    fmt::print("fastest that fits: {} at batch {}, {:.1f} samples/s\n", best.policy, best.batch_size,
               best.samples_per_s);
  } else {
    fmt::print("nothing fits in {} MiB\n", in_mib(sweep.memory_limit));
  }
  fmt::print("wrote {}, {}\n", (out / "batches.csv").string(), (out / "batches.json").string());
  fmt::print("plot:   /usr/bin/python3 tools/plot_batches.py {} -o {}\n", (out / "batches.csv").string(),
             (out / "batches.svg").string());
}

void run_batches(workloads::BatchSweepOptions options, const std::string& out_dir) {
  const std::filesystem::path out = make_out_dir(out_dir);
  options.progress = [](const std::string& line) {
    fmt::print(stderr, "{}\n", line);
    std::fflush(stderr);
  };
  const workloads::BatchSweep sweep = workloads::sweep_batches(options);
  write_file_atomically((out / "batches.csv").string(), workloads::batch_csv(sweep));
  write_file_atomically((out / "batches.json").string(), workloads::batch_json(sweep).dump(2) + "\n");
  print_batches(options, sweep, out);
}

class TradeoffCommand : public Command {
 public:
  void add(CLI::App& app) override {
    tradeoff_ = app.add_subcommand(
        "tradeoff", "sweep recompute policies and budgets on a workload: peak memory against step time");
    tradeoff_->add_option("--workload", options_.workload, "W1, W2, W3 (GPT-2 124M, --device cuda), W4 (Llama "
                          "6x384) or W5 (Llama at 1B shape, --device cuda)")->capture_default_str();
    add_model_options(tradeoff_, options_.model, model_);
    tradeoff_->add_option("--device", options_.device, "cpu, or cuda[:N] (the CUDA kernels: not yet run on a GPU)")
        ->capture_default_str();
    tradeoff_->add_option("--threads", options_.threads, "CPU threads")->capture_default_str();
    tradeoff_->add_option("--steps", options_.steps, "timed steps per run")->capture_default_str();
    tradeoff_->add_option("--rounds", options_.rounds, "interleaved repeats of the sweep (median step time)")
        ->capture_default_str();
    tradeoff_->add_flag("--paired", options_.paired, "time each run against a keep-all copy stepped alternately "
                        "(the median of per-step ratios)");
    tradeoff_->add_option("--warmup", options_.warmup,
                          "untimed steps first per run (at least 1; more while a plan is remade from measured times)")
        ->capture_default_str();
    tradeoff_->add_option("--seed", seed_, "seed of weights and batch (0)");
    tradeoff_->add_option("--policies", policies_, "policies swept after keep-all, e.g. "
                          "blocks,sqrt,cost,chain,milp,auto,dtr,every-n-blocks:2,recompute-modules:attn,mlp "
                          "(blocks,sqrt,cost,chain,milp,auto,dtr)");
    CLI::Option* budgets = tradeoff_->add_option("--budgets", fractions_, "budgets of the policies that take one, as "
                                                 "shares of keep-all's peak: 25%,50% or 0.25,0.5 "
                                                 "(25%,35%,50%,60%,75%,90%)");
    tradeoff_->add_option("--fractions", fractions_, "the same as --budgets (its older name)")->excludes(budgets);
    tradeoff_->add_option("--solver-time-limit", options_.solver_time_limit_s, "milp: seconds for its search per plan")
        ->capture_default_str()->check(CLI::Range(0.001, 86400.0));
    tradeoff_->add_option("--profile", options_.profile_path, "plan every run from this saved profile (JSON, "
                          "from bench or explain --save-profile): the same plans on every sweep");
    tradeoff_->add_option("--memory-limit", memory_limit_, "with --batch-sizes: the bytes a run may hold at its peak, "
                          "every category counted (256MiB, 1.5GiB, or bytes)");
    tradeoff_->add_option("--batch-sizes", batch_sizes_, "with --memory-limit: the batch sweep, each policy at each "
                          "batch size (8,16,32,64): whether it fits, its peak, samples/s; default policies "
                          "none,blocks,cost,auto");
    tradeoff_->add_option("--out", out_dir_, "folder for tradeoff.csv, tradeoff.json and graph_<policy>.dot (with "
                          "--batch-sizes: batches.csv and batches.json)")->required();
  }

  void run() override {
    if (!seed_.empty()) options_.seed = parse_seed(seed_, "tradeoff --seed");
    finish_model_spec(tradeoff_, options_.model, model_);
    if (!policies_.empty()) options_.policies = scheduler::split_policies(policies_);
    if (!memory_limit_.empty() || !batch_sizes_.empty()) return run_batches(batch_options(), out_dir_);
    if (!fractions_.empty()) options_.budget_fractions = parse_fractions(fractions_);
    run_tradeoff(options_, out_dir_);
  }

  // The batch sweep's options from the flags; the old sweep's flags that
  // mean nothing here are errors.
  workloads::BatchSweepOptions batch_options() const {
    REMAT_CHECK(!memory_limit_.empty() && !batch_sizes_.empty(), "tradeoff: --memory-limit and --batch-sizes go "
                "together (the batch sweep: tradeoff --memory-limit 256MiB --batch-sizes 8,16,32,64)");
    for (const char* flag : {"--budgets", "--fractions", "--rounds", "--paired", "--profile", "--batch-size"}) {
      REMAT_CHECK(tradeoff_->get_option(flag)->count() == 0, "tradeoff: {} is not a flag of the batch sweep "
                  "(--batch-sizes){}", flag, std::string_view(flag) == "--batch-size" ? ": give the sizes there"
                  : ": each run's budget is what --memory-limit leaves for activations");
    }
    workloads::ModelSpec model = options_.model;
    if (model.kind.empty()) {  // a preset's model, run with --attention and --mlp as given
      model = workloads::workload_model(options_.workload);
      model.attention = options_.model.attention;
      model.mlp = options_.model.mlp;
    }
    workloads::BatchSweepOptions batch{
        .model = model,
        .batch_sizes = parse_batch_sizes(batch_sizes_),
        .memory_limit = train::parse_bytes(memory_limit_, "tradeoff --memory-limit"),
        .device = options_.device, .threads = options_.threads, .steps = options_.steps, .warmup = options_.warmup,
        .seed = options_.seed, .solver_time_limit_s = options_.solver_time_limit_s};
    if (tradeoff_->get_option("--policies")->count() > 0) batch.policies = options_.policies;
    return batch;
  }

 private:
  CLI::App* tradeoff_ = nullptr;
  std::string policies_;  // split by scheduler::split_policies: a module list keeps its commas
  workloads::TradeoffOptions options_;
  std::string fractions_, out_dir_, seed_, memory_limit_, batch_sizes_;
  ModelFlags model_;
};

}  // namespace

std::unique_ptr<Command> make_tradeoff_command() { return std::make_unique<TradeoffCommand>(); }

}  // namespace remat::tools
