// remat tradeoff: sweep recompute policies and budgets on a workload (or a
// model of the user's) and write tradeoff.csv, tradeoff.json and the DOT
// graphs of blocks and cost into --out, with a table of what it measured;
// progress on stderr. The sweep itself is train/tradeoff.h's.
#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "engine/error.h"
#include "scheduler/dot.h"
#include "tools/command.h"
#include "train/tradeoff.h"

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

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  file.close();
  REMAT_CHECK(file.good(), "tradeoff: cannot write {}", path.string());
}

// graph_blocks.dot and graph_cost.dot: the graph with each plan's tags.
void write_graphs(const train::TradeoffOptions& options, const std::filesystem::path& out,
                  std::vector<std::string>& written) {
  for (const char* policy : {"blocks", "cost"}) {
    fmt::print(stderr, "planning {} {} for graph_{}.dot ...\n", train::describe(options.model, options.workload),
               policy, policy);
    const auto [graph, plan] = train::plan_workload(
        {.workload = options.workload, .policy = policy, .threads = options.threads, .warmup = 1, .seed = options.seed,
         .device = options.device, .profile_path = options.profile_path, .model = options.model});
    const std::filesystem::path path = out / fmt::format("graph_{}.dot", policy);
    write_file(path, scheduler::to_dot(graph, plan));
    written.push_back(path.string());
  }
}

// The table of what the sweep measured, and how to plot it.
void print_rows(const train::TradeoffOptions& options, const std::vector<train::TradeoffRow>& rows,
                const std::filesystem::path& out, const std::vector<std::string>& written) {
  fmt::print("{} trade-off on {}, {} thread(s), median of {} step(s) after {} warm-up(s)\n",
             train::describe(options.model, options.workload),
             options.device, options.threads, options.steps, options.warmup);
  fmt::print("{:<8} {:>10} {:>10} {:>10} {:>9} {:>6} {:>8} {:>7}\n", "policy", "budget", "peak", "predicted", "step_ms",
             "x_all", "replays", "pareto");
  auto in_mib = [](std::optional<int64_t> bytes) {
    return bytes ? fmt::format("{:.2f}", static_cast<double>(*bytes) / (1024.0 * 1024.0)) : std::string("-");
  };
  for (const train::TradeoffRow& row : rows) {
    const train::WorkloadReport& r = row.report;
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
void run_tradeoff(train::TradeoffOptions options, const std::string& out_dir) {
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
  const std::vector<train::TradeoffRow> rows = train::sweep_tradeoff(options);
  write_file(out / "tradeoff.csv", train::tradeoff_csv(rows));
  write_file(out / "tradeoff.json", train::tradeoff_json(rows).dump(2) + "\n");
  std::vector<std::string> written{(out / "tradeoff.csv").string(), (out / "tradeoff.json").string()};
  write_graphs(options, out, written);
  print_rows(options, rows, out, written);
}

class TradeoffCommand : public Command {
 public:
  void add(CLI::App& app) override {
    tradeoff_ = app.add_subcommand(
        "tradeoff", "sweep recompute policies and budgets on a workload: peak memory against step time");
    tradeoff_->add_option("--workload", options_.workload, "W1, W2, or W3 (GPT-2 124M, --device cuda)")
        ->capture_default_str();
    add_model_options(tradeoff_, options_.model, model_);
    tradeoff_->add_option("--device", options_.device, "cpu, or cuda[:N] (the CUDA kernels: not yet run on a GPU)")
        ->capture_default_str();
    tradeoff_->add_option("--threads", options_.threads, "CPU threads")->capture_default_str();
    tradeoff_->add_option("--steps", options_.steps, "timed steps per run")->capture_default_str();
    tradeoff_->add_option("--rounds", options_.rounds, "interleaved repeats of the sweep (median step time)")
        ->capture_default_str();
    tradeoff_->add_flag("--paired", options_.paired, "time each run against a keep-all copy stepped alternately "
                        "(the median of per-step ratios)");
    tradeoff_->add_option("--warmup", options_.warmup, "untimed steps first per run (at least 1)")
        ->capture_default_str();
    tradeoff_->add_option("--seed", seed_, "seed of weights and batch (0)");
    tradeoff_->add_option("--policies", options_.policies, "policies swept after keep-all, e.g. "
                          "blocks,sqrt,cost,chain,milp,auto,dtr")->delimiter(',')->capture_default_str();
    CLI::Option* budgets = tradeoff_->add_option("--budgets", fractions_, "budgets of the policies that take one, as "
                                                 "shares of keep-all's peak: 25%,50% or 0.25,0.5 "
                                                 "(25%,35%,50%,60%,75%,90%)");
    tradeoff_->add_option("--fractions", fractions_, "the same as --budgets (its older name)")->excludes(budgets);
    tradeoff_->add_option("--solver-time-limit", options_.solver_time_limit_s, "milp: seconds per plan for CBC")
        ->capture_default_str()->check(CLI::Range(0.001, 86400.0));
    tradeoff_->add_option("--profile", options_.profile_path, "plan every run from this saved profile (JSON, "
                          "from bench or explain --save-profile): the same plans on every sweep");
    tradeoff_->add_option("--out", out_dir_, "folder for tradeoff.csv, tradeoff.json and graph_<policy>.dot")
        ->required();
  }

  void run() override {
    if (!seed_.empty()) options_.seed = parse_seed(seed_, "tradeoff --seed");
    finish_model_spec(tradeoff_, options_.model, model_);
    if (!fractions_.empty()) options_.budget_fractions = parse_fractions(fractions_);
    run_tradeoff(options_, out_dir_);
  }

 private:
  CLI::App* tradeoff_ = nullptr;
  train::TradeoffOptions options_;
  std::string fractions_, out_dir_, seed_;
  ModelFlags model_;
};

}  // namespace

std::unique_ptr<Command> make_tradeoff_command() { return std::make_unique<TradeoffCommand>(); }

}  // namespace remat::tools
