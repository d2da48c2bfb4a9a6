// The memory/time trade-off of the recompute policies on one workload of
// docs/workloads.md (or a model of the user's): run_workload under
// keep-all first (its measured peak is the reference P), then each policy
// without a budget (those that take one only where that means something:
// cost and auto), then each policy that takes a budget at each budget
// fraction * P. Writes the sweep as CSV (the
// input of tools/plot_tradeoff.py) and JSON. Called by `remat tradeoff`;
// measures nothing itself (workloads/workload.h does).
//
//   std::vector<TradeoffRow> rows = sweep_tradeoff({.workload = "W2", .steps = 3});
//   write_file_atomically("tradeoff.csv", tradeoff_csv(rows));   // engine/file_write.h
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "workloads/workload.h"

namespace remat::workloads {

struct TradeoffOptions {
  std::string workload = "W1";
  std::string device = "cpu";  // cpu, or cuda[:N] (workloads/workload.h)
  int threads = 1;
  int steps = 3;   // timed steps per run
  int warmup = 1;  // untimed steps first, at least 1; a run adds the steps until its plan is final
  uint64_t seed = 0;
  // Rounds over the whole sweep, interleaved (every run once, then again):
  // a run's step time is the median of its rounds' medians, so that a slow
  // minute on a shared machine does not land on one policy alone.
  int rounds = 1;
  // Each run paired with a keep-all copy stepped alternately
  // (run_paired_workload): time_vs_keep_all is then the median of the
  // per-step ratios (over rounds, the median of the rounds' medians), and a
  // run's step_ms_median keep-all's times that ratio.
  bool paired = false;
  // The policies swept after keep-all (scheduler::policy_names(); an
  // unknown one is an error listing them).
  std::vector<std::string> policies{"blocks", "sqrt", "cost", "chain", "milp", "auto", "dtr"};
  // Budgets for the policies that take one, as fractions of keep-all's
  // measured peak.
  std::vector<double> budget_fractions{0.25, 0.35, 0.5, 0.6, 0.75, 0.9};
  // Every run's plan made from this saved profile of the workload
  // (WorkloadOptions::profile_path): the same plans on every sweep.
  std::string profile_path;
  // A model of the user's instead of `workload` (workloads/workload.h).
  ModelSpec model;
  double solver_time_limit_s = scheduler::kSolverTimeLimitS;  // milp's, per plan
  // One line before each run and one after it ("[3/16] ..."); may be empty.
  std::function<void(const std::string& line)> progress;
};

// One run of the sweep. A run whose budget the planner cannot reach gives no
// figures: `skipped` holds run_workload's error, and `report` only the
// workload, policy and budget.
struct TradeoffRow {
  WorkloadReport report;
  std::optional<double> budget_fraction;
  std::string skipped;          // "" when the run measured
  double time_vs_keep_all = 0;  // step_ms_median over keep-all's
  bool pareto = false;          // see mark_pareto
  bool ran() const { return skipped.empty(); }
};

// Runs the sweep; a run after keep-all that fails is recorded as skipped and
// the sweep goes on. Rows come back in run order, Pareto flags set. An
// unknown workload, threads < 1, steps < 1, warmup < 1 or a fraction outside
// (0, 1] is an error naming the value.
std::vector<TradeoffRow> sweep_tradeoff(const TradeoffOptions& options);

// Sets `pareto` on every measured row that no other measured row dominates:
// none has both peak_activation_bytes <= and step_ms_median <= with one of
// them strictly smaller (equal points are all on the front). Skipped rows
// are never on it.
void mark_pareto(std::vector<TradeoffRow>& rows);

inline constexpr std::string_view kTradeoffCsvHeader =
    "workload,engine,policy,budget_mib,peak_activation_mib,predicted_peak_mib,step_ms,time_vs_keep_all,"
    "recompute_ms,saved_mib,replayed_nodes,chosen_by,planning_ms";

// The header above and one line per measured row (skipped rows are left out:
// they have no point to plot). engine is "remat"; budget_mib and
// predicted_peak_mib are empty when the run had none (budget_mib has 2
// decimals, for the plot's labels; tradeoff_json has the bytes); saved_mib is
// saved_bytes_after_forward; step_ms the median; chosen_by the policy whose
// plan ran (auto's winner); planning_ms make_plan's wall time.
std::string tradeoff_csv(const std::vector<TradeoffRow>& rows);

// A JSON array: per measured row WorkloadReport::to_json() plus
// "budget_fraction", "time_vs_keep_all" and "pareto"; per skipped row its
// workload, policy, budget, "skipped" (the error) and "pareto": false.
nlohmann::ordered_json tradeoff_json(const std::vector<TradeoffRow>& rows);

}  // namespace remat::workloads
