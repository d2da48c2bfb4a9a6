// sweep_tradeoff and its writers; see tradeoff.h.
//
// Each run builds its workload afresh (run_workload), so every point starts
// from the same weights and batch and no allocator state carries over from
// the run before. Keep-all runs first because every budget is a fraction of
// its measured peak; a budget the planner cannot reach is a property of the
// graph, not a failure of the sweep, so it is recorded and the sweep goes on.
#include "workloads/tradeoff.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/factory.h"
#include "scheduler/plan.h"
#include "train/limits.h"

namespace remat::workloads {

using namespace remat::train;  // the Trainer, its arguments and its checks
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double mib(int64_t bytes) { return static_cast<double>(bytes) / kMiB; }

void check_options(const TradeoffOptions& options) {
  REMAT_CHECK(!options.model.kind.empty() || options.workload == "W1" || options.workload == "W2" ||
                  options.workload == "W3",
              "tradeoff: unknown workload '{}' (available: W1, W2, W3, or --model gpt|mlp, --hf DIR)",
              options.workload);
  REMAT_CHECK(!options.model.kind.empty() || options.workload != "W3" || device_from_name(options.device).is_cuda(),
              "tradeoff: W3 (GPT-2 124M) is a GPU workload: give --device cuda (on the CPU a step takes minutes)");
  check_threads(options.threads, "tradeoff");
  for (const std::string& policy : options.policies) scheduler::check_policy(policy);
  REMAT_CHECK(options.steps >= 1, "tradeoff: steps must be at least 1, got {}", options.steps);
  REMAT_CHECK(options.rounds >= 1, "tradeoff: rounds must be at least 1, got {}", options.rounds);
  // With no warm-up the timed step would be the first one, planned from a
  // rehearsal's nominal times (or profiled under blocks) and planned again
  // from its measured times after it (Note [The first step]).
  REMAT_CHECK(options.warmup >= 1, "tradeoff: warmup must be at least 1 (the first step, planned again from its "
              "measured times), got {}", options.warmup);
  for (const double fraction : options.budget_fractions) {
    REMAT_CHECK(std::isfinite(fraction) && fraction > 0 && fraction <= 1,
                "tradeoff: budget fraction {} is outside (0, 1]", fraction);
  }
}

// Keep-all runs first, and chain, milp and dtr need a budget to mean
// anything: the others run once without one too.
bool runs_without_budget(const std::string& policy) {
  return policy != "none" && (!scheduler::takes_budget(policy) || policy == "cost" || policy == "auto" ||
                              scheduler::is_preset(policy));
}

std::string describe(const WorkloadOptions& run, std::optional<double> fraction) {
  std::string text = fmt::format("{} {}", workloads::describe(run.model, run.workload), run.policy);
  if (run.budget) text += fmt::format(" budget {:.2f} MiB ({:g} of keep-all)", mib(*run.budget), *fraction);
  return text;
}

std::string outcome(const TradeoffRow& row) {
  if (!row.ran()) return "skipped: " + row.skipped;
  const WorkloadReport& r = row.report;
  std::string text = fmt::format("{:.1f} ms ({:.2f}x keep-all), peak {:.2f} MiB", r.step_ms_median,
                                 row.time_vs_keep_all, mib(r.peak_activation_bytes));
  if (r.predicted_peak_activation_bytes) text += fmt::format(" (predicted {:.2f})", mib(*r.predicted_peak_activation_bytes));
  return text + fmt::format(", {} replays", r.replayed_nodes);
}

// "" for an absent value: an empty CSV cell.
std::string cell(std::optional<double> value, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value) : std::string();
}

}  // namespace

namespace {

// One sweep: its runs in order (keep-all, the policies without a budget,
// then each budget's), the further rounds, and the rows they fill.
class Sweep {
 public:
  explicit Sweep(const TradeoffOptions& options)
      : options_(options),
        base_{.workload = options.workload, .solver_time_limit_s = options.solver_time_limit_s,
              .threads = options.threads, .steps = options.steps, .warmup = options.warmup, .seed = options.seed,
              .device = options.device, .profile_path = options.profile_path, .model = options.model} {
    for (const std::string& policy : options.policies) {
      if (runs_without_budget(policy)) ++runs_;
      if (scheduler::takes_budget(policy)) runs_ += options.budget_fractions.size();
    }
  }

  // The first round: every run once.
  void first_round() {
    run(base_, std::nullopt);  // keep-all: policy "none"
    const int64_t keep_all_peak = rows_.front().report.peak_activation_bytes;
    for (const std::string& policy : options_.policies) {
      if (!runs_without_budget(policy)) continue;
      WorkloadOptions o = base_;
      o.policy = policy;
      run(o, std::nullopt);
    }
    for (const double fraction : options_.budget_fractions) {
      for (const std::string& policy : options_.policies) {
        if (!scheduler::takes_budget(policy)) continue;
        WorkloadOptions o = base_;
        o.policy = policy;
        if (policy == "dtr") o.profile_path.clear();  // it plans nothing, from a profile or not
        o.budget = std::max<int64_t>(1, std::llround(fraction * static_cast<double>(keep_all_peak)));
        run(o, fraction);
      }
    }
  }

  // Further rounds: the same runs again, in the same order; step times are
  // the median over rounds (memory figures do not change from run to run).
  std::vector<TradeoffRow> further_rounds() {
    std::vector<std::vector<double>> step_ms(rows_.size());
    for (size_t i = 0; i < rows_.size(); ++i) step_ms[i].push_back(rows_[i].report.step_ms_median);
    for (int round = 2; round <= options_.rounds; ++round) {
      for (size_t i = 0; i < rows_.size(); ++i) {
        if (!rows_[i].ran()) continue;
        WorkloadOptions o = base_;
        o.policy = rows_[i].report.policy;
        o.budget = rows_[i].report.budget;
        if (options_.progress) options_.progress(fmt::format("round {}/{}: {}", round, options_.rounds, describe(o, rows_[i].budget_fraction)));
        const auto [again, ratio] = measure(o, i == 0);
        ratios_[i].push_back(ratio);
        step_ms[i].push_back(again.step_ms_median);
        rows_[i].report.step_ms_min = std::min(rows_[i].report.step_ms_min, again.step_ms_min);
        rows_[i].report.step_ms_max = std::max(rows_[i].report.step_ms_max, again.step_ms_max);
      }
    }
    for (size_t i = 0; i < rows_.size(); ++i) rows_[i].report.step_ms_median = median(step_ms[i]);
    const double keep_all_ms = rows_.front().report.step_ms_median;
    for (size_t i = 0; i < rows_.size(); ++i) {
      TradeoffRow& row = rows_[i];
      if (!row.ran()) continue;
      if (options_.paired) {
        row.time_vs_keep_all = median(ratios_[i]);
        row.report.step_ms_median = keep_all_ms * row.time_vs_keep_all;
      } else {
        row.time_vs_keep_all = row.report.step_ms_median / keep_all_ms;
      }
    }
    return std::move(rows_);
  }

 private:
  void say(const std::string& line) const {
    if (options_.progress) options_.progress(fmt::format("[{}/{}] {}", rows_.size() + 1, runs_, line));
  }

  // One measurement of a run: alone, or paired with keep-all (not keep-all itself).
  std::pair<WorkloadReport, double> measure(const WorkloadOptions& run_options, bool reference) const {
    if (!options_.paired || reference) return std::pair{run_workload(run_options), 1.0};
    const PairedReport paired = run_paired_workload(run_options, "none");
    return std::pair{paired.report, median(paired.time_ratios)};
  }

  // A run's row; a run that fails (a budget no plan reaches) is a skipped
  // row, unless it is keep-all.
  void run(const WorkloadOptions& run_options, std::optional<double> fraction) {
    const std::string what = describe(run_options, fraction);
    say(what + " ...");
    TradeoffRow row{.budget_fraction = fraction};
    ratios_.emplace_back();
    try {
      double ratio = 1.0;
      std::tie(row.report, ratio) = measure(run_options, rows_.empty());
      ratios_.back().push_back(ratio);
    } catch (const Error& e) {
      if (rows_.empty()) throw;  // keep-all is the reference: without it there is no sweep
      row.report = WorkloadReport{.workload = workloads::describe(run_options.model, run_options.workload),
                                  .policy = run_options.policy,
                                  .budget = run_options.budget, .threads = run_options.threads};
      row.skipped = e.what();
    }
    if (row.ran()) {
      const double keep_all_ms = rows_.empty() ? row.report.step_ms_median : rows_.front().report.step_ms_median;
      row.time_vs_keep_all = options_.paired ? ratios_.back().front() : row.report.step_ms_median / keep_all_ms;
    }
    say(what + ": " + outcome(row));
    rows_.push_back(std::move(row));
  }

  const TradeoffOptions& options_;
  const WorkloadOptions base_;
  size_t runs_ = 1;  // keep-all
  std::vector<TradeoffRow> rows_;
  // Per row: the paired median ratio of each round (paired sweeps only).
  std::vector<std::vector<double>> ratios_;
};

}  // namespace

std::vector<TradeoffRow> sweep_tradeoff(const TradeoffOptions& options) {
  check_options(options);
  Sweep sweep(options);
  sweep.first_round();
  std::vector<TradeoffRow> rows = sweep.further_rounds();
  mark_pareto(rows);
  return rows;
}

void mark_pareto(std::vector<TradeoffRow>& rows) {
  for (TradeoffRow& row : rows) {
    row.pareto = row.ran();
    if (!row.pareto) continue;
    const int64_t peak = row.report.peak_activation_bytes;
    const double ms = row.report.step_ms_median;
    for (const TradeoffRow& other : rows) {
      if (!other.ran()) continue;
      const int64_t other_peak = other.report.peak_activation_bytes;
      const double other_ms = other.report.step_ms_median;
      if (other_peak <= peak && other_ms <= ms && (other_peak < peak || other_ms < ms)) {
        row.pareto = false;
        break;
      }
    }
  }
}

std::string tradeoff_csv(const std::vector<TradeoffRow>& rows) {
  std::string out = std::string(kTradeoffCsvHeader) + "\n";
  for (const TradeoffRow& row : rows) {
    if (!row.ran()) continue;
    const WorkloadReport& r = row.report;
    const std::optional<double> budget = r.budget ? std::optional(mib(*r.budget)) : std::nullopt;
    const std::optional<double> predicted =
        r.predicted_peak_activation_bytes ? std::optional(mib(*r.predicted_peak_activation_bytes)) : std::nullopt;
    // A recompute-modules list has commas: that field is quoted (CSV's rule).
    const std::string policy = r.policy.find(',') == std::string::npos ? r.policy : "\"" + r.policy + "\"";
    out += fmt::format("{},remat,{},{},{:.3f},{},{:.3f},{:.4f},{:.3f},{:.3f},{},{},{:.1f}\n", r.workload, policy,
                       cell(budget, "{:.2f}"), mib(r.peak_activation_bytes), cell(predicted, "{:.3f}"),
                       r.step_ms_median, row.time_vs_keep_all, r.recompute_ms, mib(r.saved_bytes_after_forward),
                       r.replayed_nodes, r.chosen_by, r.planning_ms);
  }
  return out;
}

nlohmann::ordered_json tradeoff_json(const std::vector<TradeoffRow>& rows) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const TradeoffRow& row : rows) {
    nlohmann::ordered_json j;
    if (row.ran()) {
      j = row.report.to_json();
    } else {
      j["workload"] = row.report.workload;
      j["policy"] = row.report.policy;
      j["budget_bytes"] = row.report.budget ? nlohmann::ordered_json(*row.report.budget) : nullptr;
      j["threads"] = row.report.threads;
      j["engine"] = "remat";
      j["skipped"] = row.skipped;
    }
    j["budget_fraction"] = row.budget_fraction ? nlohmann::ordered_json(*row.budget_fraction) : nullptr;
    if (row.ran()) j["time_vs_keep_all"] = row.time_vs_keep_all;
    j["pareto"] = row.pareto;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace remat::workloads
