// remat explain: one row per node of a workload's graph, what it costs and
// what the policy decided and why, as a table, CSV or JSON lines. With
// --profile the saved profile is planned instead of running the workload.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "scheduler/profile_json.h"
#include "tools/command.h"

namespace remat::tools {
namespace {

// The table's name column: as wide as the longest name.
size_t name_width(const scheduler::GraphProfile& graph) {
  size_t width = 4;
  for (const scheduler::NodeProfile& n : graph.nodes) width = std::max(width, n.name.size());
  return width;
}

// The plan, before the rows: one JSON line, a CSV header, or the table's
// summary lines and header.
void print_plan(const scheduler::GraphProfile& graph, const scheduler::Plan& plan, const std::string& format) {
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
                                       {"warnings", plan.warnings},
                                       {"solver", plan.solver ? nlohmann::json(workloads::solver_json(*plan.solver))
                                                             : nlohmann::json(nullptr)}}.dump());
  }
  if (format == "csv") {
    for (const std::string& warning : plan.warnings) fmt::print(stderr, "warning: {}\n", warning);
    fmt::print("position,name,op,block,output_shape,output_bytes,flops,replay_flops,forward_ms,replay_ms,"
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
    for (const std::string& warning : plan.warnings) fmt::print("warning: {}\n", warning);
    if (plan.solver) {
      const scheduler::SolverReport& r = *plan.solver;
      fmt::print("solver (CBC): {}; objective {:.3f} ms of recompute, bound {:.3f} ms, gap {:.2f}% (over {}), {:.2f} "
                 "s, {} variables, {} constraints, {} solves; its plan from {}\n", r.status, r.objective_ms, r.bound_ms,
                 100 * r.gap, r.space, r.solve_seconds, r.variables, r.constraints, r.solves, r.found_by);
    }
    fmt::print("{:>5} {:<{}} {:<18} {:>10} {:>9} {:>8} {:>8} {:>9} {:<9} {}\n", "pos", "name", name_width(graph),
               "output", "MiB", "MFLOP", "ms", "replay", "ms/MiB", "decision", "reason");
  }
}

// One node's row: what it costs and what the plan decided.
void print_node(const scheduler::NodeProfile& n, const scheduler::Plan& plan, const std::string& format,
                size_t name_width) {
  const double out_mib = static_cast<double>(n.output_bytes) / (1024.0 * 1024.0);
  const char* decision = plan.tags[n.position] == Tag::Keep ? "KEEP" : "RECOMPUTE";
  const bool in_place = plan.predicted.replayed_in_place[static_cast<size_t>(n.position)];
  const std::string reason = plan.reasons[n.position] + (in_place ? "; replays in place over its input" : "");
  // Timed replays (else a replay is priced at forward's time); the table
  // shows the one ms/MiB prices.
  const auto timed = [](double ms) { return ms > 0 ? nlohmann::json(ms) : nlohmann::json(nullptr); };
  const auto csv = [](double ms) { return ms > 0 ? fmt::format("{:.6f}", ms) : std::string(); };
  const bool replay_timed = n.replay_ms > 0 || n.replay_in_place_ms > 0;
  if (format == "json") {
    fmt::print("{}\n", nlohmann::json{{"position", n.position}, {"name", n.name}, {"op", n.op}, {"block", n.block},
                                       {"output_shape", n.output_shape}, {"output_bytes", n.output_bytes},
                                       {"flops", n.flops}, {"replay_flops", n.replay_flops},
                                       {"forward_ms", n.forward_ms},
                                       {"replay_ms", timed(n.replay_ms)},
                                       {"replay_in_place_ms", timed(n.replay_in_place_ms)},
                                       {"ms_per_mib", n.output_bytes ? nlohmann::json(n.ms_per_mib()) : nullptr},
                                       {"decision", decision}, {"replays_in_place", in_place}, {"reason", reason}}.dump());
  } else if (format == "csv") {
    fmt::print("{},{},{},{},\"{}\",{},{},{},{:.6f},{},{},{:.6f},{},\"{}\"\n", n.position, n.name, n.op, n.block,
               str(n.output_shape), n.output_bytes, n.flops, n.replay_flops, n.forward_ms, csv(n.replay_ms),
               csv(n.replay_in_place_ms), n.ms_per_mib(), decision, reason);
  } else {
    fmt::print("{:>5} {:<{}} {:<18} {:>10.3f} {:>9.2f} {:>8.3f} {:>8} {:>9.3f} {:<9} {}\n", n.position,
               n.name, name_width, str(n.output_shape), out_mib, static_cast<double>(n.flops) / 1e6, n.forward_ms,
               replay_timed ? fmt::format("{:.3f}", n.priced_replay_ms()) : "-", n.ms_per_mib(), decision, reason);
  }
}

// What plan_workload is doing, on stderr once it has taken more than a few
// seconds (a large model's rehearsal and plans: an 8B Llama's take several):
// the phase then under way, and every phase after it as it starts, with
// the seconds since the start. A quick explain prints nothing.
class PlanningProgress {
 public:
  static constexpr std::chrono::seconds kQuiet{3};

  PlanningProgress() : start_(Clock::now()), watcher_([this] { watch(); }) {}
  ~PlanningProgress() {
    {
      const std::lock_guard lock(mutex_);
      done_ = true;
    }
    woken_.notify_all();
    watcher_.join();
  }
  PlanningProgress(const PlanningProgress&) = delete;
  PlanningProgress& operator=(const PlanningProgress&) = delete;

  void phase(const std::string& line) {
    const std::lock_guard lock(mutex_);
    phase_ = line;
    if (loud_) print();
  }

 private:
  using Clock = std::chrono::steady_clock;

  void watch() {
    std::unique_lock lock(mutex_);
    if (woken_.wait_for(lock, kQuiet, [this] { return done_; })) return;
    loud_ = true;
    print();
  }

  void print() const {  // under mutex_
    const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    fmt::print(stderr, "explain: [{:.1f} s] {}\n", seconds, phase_);
    std::fflush(stderr);
  }

  Clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable woken_;
  std::string phase_ = "starting";
  bool done_ = false, loud_ = false;
  std::thread watcher_;  // last: it reads the members above
};

// With options.profile_path, the saved profile is planned instead of
// running the workload; options.save_profile_path: the profile planned from.
void run_explain(workloads::WorkloadOptions options, const std::string& format) {
  const auto [graph, plan] = [&] {
    PlanningProgress progress;
    options.progress = [&progress](const std::string& line) { progress.phase(line); };
    return workloads::plan_workload(options);
  }();
  if (!options.save_profile_path.empty()) scheduler::save_profile(graph, options.save_profile_path);
  print_plan(graph, plan, format);
  const size_t width = name_width(graph);
  for (const scheduler::NodeProfile& n : graph.nodes) print_node(n, plan, format, width);
}

class ExplainCommand : public Command {
 public:
  void add(CLI::App& app) override {
    explain_ = app.add_subcommand("explain", "one row per node of a workload's graph: cost and decision");
    add_plan_options(explain_, options_, budget_);
    add_model_options(explain_, options_.model, model_);
    explain_->add_option("--threads", options_.threads, "CPU threads")->capture_default_str();
    explain_->add_option("--format", format_, "table, csv or json")->check(CLI::IsMember({"table", "csv", "json"}))
        ->capture_default_str();
    explain_->add_option("--profile", options_.profile_path,
                         "plan this saved profile (JSON) instead of running the workload");
    explain_->add_option("--save-profile", options_.save_profile_path, "write the profile planned from (JSON)");
  }

  void run() override {
    finish_model_spec(explain_, options_.model, model_);
    apply_budget(budget_, "explain --budget", options_);
    run_explain(options_, format_);
  }

 private:
  CLI::App* explain_ = nullptr;
  workloads::WorkloadOptions options_{.warmup = 1};
  std::string format_ = "table";
  std::string budget_;
  ModelFlags model_;
};

}  // namespace

std::unique_ptr<Command> make_explain_command() { return std::make_unique<ExplainCommand>(); }

}  // namespace remat::tools
