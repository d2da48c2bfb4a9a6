// The trade-off sweep: a short W1 sweep (every policy, a reachable and an
// unreachable budget), the Pareto flags and the CSV/JSON writers on rows
// made by hand.
#include "workloads/tradeoff.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

namespace remat::workloads {
namespace {

constexpr int64_t kMebibyte = 1024 * 1024;

TradeoffRow measured_policy(const char* policy, int64_t peak, double ms) {
  TradeoffRow row;
  row.report.workload = "W1";
  row.report.policy = policy;
  row.report.peak_activation_bytes = peak;
  row.report.step_ms_median = ms;
  return row;
}

std::vector<std::string> csv_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Tradeoff, ParetoKeepsRowsNoOtherBeatsInBothPeakAndTime) {
  std::vector<TradeoffRow> rows{measured_policy("a", 10, 100), measured_policy("b", 5, 120), measured_policy("c", 5, 110),
                                measured_policy("d", 20, 90),  measured_policy("e", 20, 95), measured_policy("f", 1, 1),
                                measured_policy("g", 10, 100)};
  rows[5].skipped = "plan: cannot fit";  // skipped: no point, never on the front, beats nobody
  mark_pareto(rows);
  std::vector<bool> flags;
  for (const TradeoffRow& row : rows) flags.push_back(row.pareto);
  EXPECT_EQ(flags, (std::vector<bool>{true, false, true, true, false, false, true}));
}

TEST(Tradeoff, CsvHasTheHeaderAndOneLinePerMeasuredRow) {
  std::vector<TradeoffRow> rows{measured_policy("none", 20 * kMebibyte, 400), measured_policy("cost", 10 * kMebibyte, 440),
                                measured_policy("chain", 0, 0)};
  rows[0].time_vs_keep_all = 1.0;
  rows[0].report.saved_bytes_after_forward = 16 * kMebibyte;
  rows[1].report.budget = 10 * kMebibyte;
  rows[1].report.predicted_peak_activation_bytes = 10 * kMebibyte + kMebibyte / 2;
  rows[1].report.recompute_ms = 12.5;
  rows[1].report.replayed_nodes = 7;
  rows[1].time_vs_keep_all = 1.1;
  rows[1].report.chosen_by = "cost";
  rows[1].report.planning_ms = 12.34;
  rows[2].skipped = "plan: policy chain cannot fit";
  const std::vector<std::string> lines = csv_lines(tradeoff_csv(rows));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "workload,engine,policy,budget_mib,peak_activation_mib,predicted_peak_mib,step_ms,time_vs_keep_all,"
            "recompute_ms,saved_mib,replayed_nodes,chosen_by,planning_ms");
  EXPECT_EQ(lines[1], "W1,remat,none,,20.000,,400.000,1.0000,0.000,16.000,0,,0.0");
  EXPECT_EQ(lines[2], "W1,remat,cost,10.00,10.000,10.500,440.000,1.1000,12.500,0.000,7,cost,12.3");

  const nlohmann::ordered_json json = tradeoff_json(rows);
  ASSERT_EQ(json.size(), 3u);
  EXPECT_EQ(json[0]["engine"], "remat");
  EXPECT_TRUE(json[0]["budget_fraction"].is_null());
  EXPECT_EQ(json[1]["budget_bytes"], 10 * kMebibyte);
  EXPECT_EQ(json[2]["skipped"], "plan: policy chain cannot fit");
  EXPECT_EQ(json[2]["pareto"], false);
  for (const auto& j : json) EXPECT_TRUE(j.contains("pareto"));
}

TEST(Tradeoff, BadOptionsNameTheValue) {
  auto message = [](const TradeoffOptions& options) {
    try {
      sweep_tradeoff(options);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({.workload = "W9"}).find("'W9'"), std::string::npos);
  EXPECT_NE(message({.warmup = 0}).find("got 0"), std::string::npos);
  EXPECT_NE(message({.budget_fractions = {0.5, 1.5}}).find("1.5"), std::string::npos);
  EXPECT_NE(message({.budget_fractions = {-0.25}}).find("-0.25"), std::string::npos);
  EXPECT_NE(message({.policies = {"blocks", "sqrtt"}}).find("unknown recompute policy 'sqrtt'"), std::string::npos);
}

// dtr beside the static plans (tradeoff --policies).
TEST(Tradeoff, DtrRunsAtEachFractionWhenAskedFor) {
  const ModelSpec mlp{.kind = "mlp", .dims = {32, 128, 128, 128, 128, 128, 128, 128, 128, 10}, .batch_size = 256};
  const std::vector<TradeoffRow> rows = sweep_tradeoff(
      {.steps = 1, .warmup = 1, .policies = {"blocks", "sqrt", "cost", "dtr"}, .budget_fractions = {0.5, 0.8},
       .model = mlp});
  ASSERT_EQ(rows.size(), 8u);
  const std::vector<std::string> policies{"none", "blocks", "sqrt", "cost", "cost", "dtr", "cost", "dtr"};
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].report.policy, policies[i]) << i;
  for (const size_t i : {5u, 7u}) {
    ASSERT_TRUE(rows[i].ran()) << rows[i].skipped;
    EXPECT_LE(rows[i].report.peak_activation_bytes, *rows[i].report.budget);
    EXPECT_GT(rows[i].report.evictions, 0);
  }
  EXPECT_NE(tradeoff_csv(rows).find(",dtr,"), std::string::npos);
}

// About 15 steps of W1 (0.4 s each at 1 thread).
TEST(TradeoffSlow, W1SweepRunsEveryPolicyAndSkipsAnUnreachableBudget) {
  std::vector<std::string> progress;
  const std::vector<TradeoffRow> rows =
      sweep_tradeoff({.workload = "W1", .steps = 1, .warmup = 1, .policies = {"blocks", "sqrt", "cost", "chain"},
                      .budget_fractions = {0.1, 0.7, 0.9},
                      .progress = [&](const std::string& line) { progress.push_back(line); }});
  ASSERT_EQ(rows.size(), 10u);
  EXPECT_EQ(progress.size(), 20u);  // one line before and one after each run
  EXPECT_EQ(progress.front().rfind("[1/10] W1 none", 0), 0u) << progress.front();

  const std::vector<std::string> policies{"none", "blocks", "sqrt", "cost", "cost",
                                          "chain", "cost", "chain", "cost", "chain"};
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].report.policy, policies[i]) << i;

  const TradeoffRow& keep_all = rows[0];
  ASSERT_TRUE(keep_all.ran());
  EXPECT_FALSE(keep_all.report.budget.has_value());
  EXPECT_EQ(keep_all.time_vs_keep_all, 1.0);
  const int64_t peak = keep_all.report.peak_activation_bytes;
  EXPECT_GT(peak, 20 * kMebibyte);

  // 10% of keep-all (2 MiB) is below one Linear's weight gradient: no plan fits
  // (W1 reaches 12 of its 20 MiB at best).
  for (size_t i : {4, 5}) {
    EXPECT_FALSE(rows[i].ran()) << rows[i].report.policy;
    EXPECT_EQ(rows[i].budget_fraction, 0.1);
    EXPECT_FALSE(rows[i].skipped.empty());
    EXPECT_FALSE(rows[i].pareto);
  }
  for (size_t i = 1; i < rows.size(); ++i) {
    const TradeoffRow& row = rows[i];
    if (!row.ran()) continue;
    const WorkloadReport& r = row.report;
    EXPECT_GT(r.step_ms_median, 0.0);
    EXPECT_GT(r.peak_activation_bytes, 0);
    EXPECT_LE(r.peak_activation_bytes, peak + peak / 50) << r.policy;  // checkpointing never costs memory
    ASSERT_TRUE(r.predicted_peak_activation_bytes.has_value()) << r.policy;
    const double predicted = static_cast<double>(*r.predicted_peak_activation_bytes);
    EXPECT_NEAR(predicted / static_cast<double>(r.peak_activation_bytes), 1.0, 0.02) << r.policy;
    if (r.budget) {
      EXPECT_EQ(*r.budget, std::llround(*row.budget_fraction * static_cast<double>(peak)));
      EXPECT_LE(r.peak_activation_bytes, *r.budget + *r.budget / 50) << r.policy << " " << *row.budget_fraction;
    }
  }
  // cost reaches 70% and 90% of keep-all, and a smaller budget never
  // measures a larger peak.
  ASSERT_TRUE(rows[6].ran() && rows[8].ran()) << rows[6].skipped << rows[8].skipped;
  for (size_t i : {6, 7}) {
    if (!rows[i].ran() || !rows[i + 2].ran()) continue;
    EXPECT_LE(rows[i].report.peak_activation_bytes, rows[i + 2].report.peak_activation_bytes + peak / 50);
  }
  int on_front = 0;
  for (const TradeoffRow& row : rows) on_front += row.pareto;
  EXPECT_GE(on_front, 1);

  const std::vector<std::string> csv = csv_lines(tradeoff_csv(rows));
  EXPECT_EQ(csv.front(), kTradeoffCsvHeader);
  size_t skipped = 0;
  for (const TradeoffRow& row : rows) skipped += !row.ran();
  EXPECT_EQ(csv.size(), 1 + rows.size() - skipped);  // skipped runs have no line
  EXPECT_EQ(tradeoff_json(rows).size(), rows.size());
}

TEST(TradeoffSlow, APairedSweepTimesEachRunAgainstAKeepAllCopy) {
  const std::vector<TradeoffRow> rows = sweep_tradeoff(
      {.workload = "W1", .steps = 2, .warmup = 1, .rounds = 2, .paired = true,
       .policies = {"blocks", "sqrt", "cost", "chain"}, .budget_fractions = {0.9}});
  ASSERT_EQ(rows.size(), 6u);
  ASSERT_TRUE(rows[0].ran());
  EXPECT_EQ(rows[0].time_vs_keep_all, 1.0);
  const double keep_all_ms = rows[0].report.step_ms_median;
  for (size_t i = 1; i < rows.size(); ++i) {
    ASSERT_TRUE(rows[i].ran()) << rows[i].report.policy;
    EXPECT_GT(rows[i].time_vs_keep_all, 0.0);
    // Paired: the row's step time is keep-all's times its measured ratio.
    EXPECT_DOUBLE_EQ(rows[i].report.step_ms_median, keep_all_ms * rows[i].time_vs_keep_all);
  }
}

}  // namespace
}  // namespace remat::workloads
