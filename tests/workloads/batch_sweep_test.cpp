// The batch that fits: the fits flags and the fastest rows follow from the
// measured peaks and times (rows made by hand, and a short sweep of a small
// MLP with a limit between two batches' peaks), a budget the graph cannot
// reach is a row that does not fit, bad options are errors, and the CSV.
#include "workloads/batch_sweep.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace remat::workloads {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

BatchRow measured_batch(int64_t batch, const char* policy, int64_t peak_total, double step_ms) {
  BatchRow row{.batch_size = batch, .policy = policy};
  row.report.emplace();
  row.report->policy = policy;
  row.report->peak_total_bytes = peak_total;
  row.report->step_ms_median = step_ms;
  return row;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A small MLP's sweep options (fast: one warm-up, one timed step).
BatchSweepOptions small_mlp(std::vector<int64_t> batches, std::vector<std::string> policies, int64_t limit) {
  BatchSweepOptions options{.batch_sizes = std::move(batches), .policies = std::move(policies), .memory_limit = limit,
                            .steps = 1, .warmup = 1};
  options.model.kind = "mlp";
  options.model.dims = {64, 256, 256, 256, 8};
  return options;
}

TEST(BatchSweep, FitsAndFastestFollowFromPeaksAndTimes) {
  BatchSweep sweep{.model = "m", .memory_limit = 100 * kMiB};
  sweep.rows = {measured_batch(8, "none", 60 * kMiB, 100),     // fits: 80 samples/s
                measured_batch(16, "none", 101 * kMiB, 100),   // over by a MiB: hollow, never fastest
                measured_batch(8, "cost", 50 * kMiB, 200),     // fits: 40 samples/s
                measured_batch(16, "cost", 70 * kMiB, 160),    // fits: 100 samples/s, the fastest of all
                measured_batch(32, "cost", 100 * kMiB, 320),   // exactly the limit fits: 100 samples/s, a tie (first wins)
                BatchRow{.batch_size = 64, .policy = "cost", .reason = "plan: cannot fit"}};
  judge_batches(sweep);
  std::vector<bool> fits, fastest;
  for (const BatchRow& row : sweep.rows) {
    fits.push_back(row.fits);
    fastest.push_back(row.fastest);
  }
  EXPECT_EQ(fits, (std::vector<bool>{true, false, true, true, true, false}));
  EXPECT_EQ(fastest, (std::vector<bool>{true, false, false, true, false, false}));
  EXPECT_DOUBLE_EQ(sweep.rows[0].samples_per_s, 80.0);
  EXPECT_DOUBLE_EQ(sweep.rows[3].samples_per_s, 100.0);
  ASSERT_TRUE(sweep.fastest);
  EXPECT_EQ(*sweep.fastest, 3u);
  EXPECT_NE(sweep.rows[1].reason.find("101.00 MiB is over the limit 100.00 MiB"), std::string::npos)
      << sweep.rows[1].reason;
  EXPECT_EQ(sweep.rows[5].reason, "plan: cannot fit");

  sweep.memory_limit = 10 * kMiB;  // nothing fits: no fastest anywhere
  judge_batches(sweep);
  EXPECT_FALSE(sweep.fastest);
  for (const BatchRow& row : sweep.rows) EXPECT_FALSE(row.fits || row.fastest);
}

TEST(BatchSweep, ALimitBetweenTwoBatchesPeaksFitsTheSmallerOnly) {
  // The peaks without a limit that binds, then the same sweep with the
  // limit halfway between the two batches' keep-all peaks.
  const BatchSweep loose = sweep_batches(small_mlp({4, 256}, {"none"}, int64_t{1} << 40));
  ASSERT_EQ(loose.rows.size(), 2u);
  const int64_t small = loose.rows[0].report->peak_total_bytes, large = loose.rows[1].report->peak_total_bytes;
  ASSERT_LT(small, large);
  const int64_t limit = (small + large) / 2;
  const BatchSweep sweep = sweep_batches(small_mlp({4, 256}, {"none", "cost"}, limit));
  ASSERT_EQ(sweep.rows.size(), 4u);
  for (const BatchRow& row : sweep.rows) {
    if (!row.report) {
      EXPECT_FALSE(row.fits);
      EXPECT_FALSE(row.reason.empty());
      continue;
    }
    EXPECT_EQ(row.fits, row.report->peak_total_bytes <= limit) << row.policy << " B" << row.batch_size;
    EXPECT_DOUBLE_EQ(row.samples_per_s, row.batch_size * 1000.0 / row.report->step_ms_median);
    EXPECT_GT(row.resident_bytes, 0);
  }
  EXPECT_TRUE(sweep.rows[0].fits);   // none at batch 4
  EXPECT_FALSE(sweep.rows[2].fits);  // none at batch 256: over the limit, with its peak
  EXPECT_EQ(sweep.rows[2].report->peak_total_bytes, large);
  // cost is given what the limit leaves for activations, so that it plans to fit.
  ASSERT_TRUE(sweep.rows[1].budget);
  EXPECT_EQ(*sweep.rows[1].budget, limit - sweep.rows[1].resident_bytes);
  EXPECT_TRUE(sweep.rows[1].fits);
  EXPECT_LE(sweep.rows[1].report->peak_activation_bytes, *sweep.rows[1].budget);
  // The fastest of all fits, and nothing that fits is faster.
  ASSERT_TRUE(sweep.fastest);
  const BatchRow& best = sweep.rows[*sweep.fastest];
  EXPECT_TRUE(best.fits && best.fastest);
  for (const BatchRow& row : sweep.rows) {
    if (row.fits) {
      EXPECT_LE(row.samples_per_s, best.samples_per_s);
    }
  }
}

TEST(BatchSweep, ABudgetBelowTheGraphsMinimumIsARowThatDoesNotFit) {
  WorkloadOptions built{.model = small_mlp({64}, {}, 0).model};
  built.model.batch_size = 64;
  const int64_t resident = resident_bytes(built);
  // 1 KiB for activations: below what any plan of the graph reaches.
  const BatchSweep sweep = sweep_batches(small_mlp({64}, {"cost"}, resident + 1024));
  ASSERT_EQ(sweep.rows.size(), 1u);
  EXPECT_FALSE(sweep.rows[0].report);
  EXPECT_FALSE(sweep.rows[0].fits);
  EXPECT_NE(sweep.rows[0].reason.find("cannot fit a budget"), std::string::npos) << sweep.rows[0].reason;
  // Less than the resident bytes: nothing left for activations, said so.
  const BatchSweep none_left = sweep_batches(small_mlp({64}, {"cost"}, resident / 2));
  EXPECT_NE(none_left.rows[0].reason.find("leaves nothing for activations"), std::string::npos);
  EXPECT_FALSE(none_left.fastest);
}

TEST(BatchSweep, BadOptionsAreErrorsNamingTheValue) {
  auto message = [](BatchSweepOptions options) {
    try {
      sweep_batches(options);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(small_mlp({}, {"none"}, kMiB)).find("no batch sizes"), std::string::npos);
  EXPECT_NE(message(small_mlp({8, 0}, {"none"}, kMiB)).find("at least 1, got 0"), std::string::npos);
  EXPECT_NE(message(small_mlp({8, 16, 8}, {"none"}, kMiB)).find("8 is given twice"), std::string::npos);
  EXPECT_NE(message(small_mlp({8}, {"none"}, 0)).find("--memory-limit"), std::string::npos);
  EXPECT_NE(message(small_mlp({8}, {"nope"}, kMiB)).find("nope"), std::string::npos);
  EXPECT_THROW(workload_model("W3"), Error);
  ModelSpec w2 = workload_model("W2");
  EXPECT_EQ(describe(w2, ""), "gpt 6x256 h4 T128 V256 untied B16");
  EXPECT_EQ(workload_model("W1").dims.size(), 17u);
}

TEST(BatchSweep, CsvHasEveryRowAndQuotesTheReason) {
  BatchSweep sweep{.model = "mlp 4-8-2", .memory_limit = 100 * kMiB};
  sweep.rows = {measured_batch(8, "none", 60 * kMiB, 100),
                BatchRow{.batch_size = 8, .policy = "cost", .budget = 40 * kMiB, .resident_bytes = 60 * kMiB,
                         .reason = "plan: cannot fit a budget of 1, \"really\""}};
  sweep.rows[0].resident_bytes = 50 * kMiB;
  judge_batches(sweep);
  const std::vector<std::string> lines = lines_of(batch_csv(sweep));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], kBatchCsvHeader);
  EXPECT_EQ(lines[1], "mlp 4-8-2,8,none,100.00,,50.000,1,60.000,0.000,,100.000,80.00,0,,1,\"\"");
  EXPECT_EQ(lines[2], "mlp 4-8-2,8,cost,100.00,40.00,60.000,0,,,,,,,,0,\"plan: cannot fit a budget of 1, "
                      "\"\"really\"\"\"");
  const nlohmann::ordered_json json = batch_json(sweep);
  EXPECT_EQ(json["fastest"]["none"]["batch_size"], 8);
  EXPECT_TRUE(json["fastest"]["cost"].is_null());
  EXPECT_EQ(json["fastest_overall"]["policy"], "none");
  EXPECT_TRUE(json["rows"][1]["run"].is_null());
}

}  // namespace
}  // namespace remat::workloads
