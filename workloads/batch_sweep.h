// The batch that fits: for a model, a memory limit and a list of batch
// sizes, each policy run at each batch size (run_workload), and whether the
// run fits the limit, its measured peak, and samples/s; the fastest fitting
// configuration per policy and overall. Checkpointing pays through the
// larger batch it allows: this measures by how much. Called by `remat
// tradeoff --memory-limit 256MiB --batch-sizes 8,16,32,64`; measures nothing
// itself (workloads/workload.h does).
//
//   BatchSweep sweep = sweep_batches({.model = workload_model("W2"), .batch_sizes = {8, 16, 32},
//                                     .memory_limit = 256 << 20});
//   write_file_atomically("batches.csv", batch_csv(sweep));   // engine/file_write.h
//
// What counts against the limit is every byte the device holds at the
// step's peak (WorkloadReport::peak_total_bytes): parameters, gradients,
// optimizer state, the batch, activations and temporaries. A policy that
// takes a budget is given what the limit leaves for activations: the limit
// less the resident bytes (parameters, their gradients, the optimizer's
// state and the batch, weighed on the built workload before the run), so
// that it plans to fit.
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

struct BatchSweepOptions {
  ModelSpec model;  // its batch_size is replaced by each of batch_sizes
  std::vector<int64_t> batch_sizes;
  std::vector<std::string> policies{"none", "blocks", "cost", "auto"};
  int64_t memory_limit = 0;  // bytes at the step's peak, every category counted
  std::string device = "cpu";
  int threads = 1;
  int steps = 3;   // timed steps per run (samples/s from their median)
  int warmup = 1;  // untimed steps first; at least 1
  uint64_t seed = 0;
  double solver_time_limit_s = scheduler::kSolverTimeLimitS;  // milp's, per plan
  // One line before each run and one after it ("[3/16] ..."); may be empty.
  std::function<void(const std::string& line)> progress;
};

// W1's, W2's, W4's and W5's models as ModelSpecs, so that the sweep can
// change their batch: W2 is gpt 6 x 256 (ModelSpec's defaults, the same
// graph, weights and tokens as W2 at batch 16); W4 and W5 are their Llamas
// (llama_workload, workload_build.h: the same workloads); W1 is mlp 1024
// (x 16), 10, the same graph on another draw of its batch. Any other name
// (W3) is an error.
ModelSpec workload_model(const std::string& workload);

// Parameters, their gradients, the optimizer's state and the batch of
// `options`' workload: built (and weighed by the allocator) and let go.
int64_t resident_bytes(const WorkloadOptions& options);

struct BatchRow {
  int64_t batch_size = 0;
  std::string policy;
  std::optional<int64_t> budget;  // the policies that take one: memory_limit - resident_bytes
  int64_t resident_bytes = 0;
  std::optional<WorkloadReport> report;  // absent when the run could not start (see reason)
  bool fits = false;
  std::string reason;        // why it does not fit; "" when it fits
  double samples_per_s = 0;  // batch_size / median step time; 0 when it did not run
  bool fastest = false;      // the fastest fitting row of its policy
};

struct BatchSweep {
  std::string model;  // describe(), without the batch
  int64_t memory_limit = 0;
  std::vector<BatchRow> rows;     // batch sizes in the order given, policies in the order given
  std::optional<size_t> fastest;  // index of the fastest fitting row of all; none when nothing fits
};

// Runs the sweep. A run that cannot start (a budget below the graph's
// minimum, or no bytes left for activations) is a row that does not fit,
// with the reason; the sweep goes on. Errors: no batch sizes, a batch size
// below 1 or given twice, no policies, an unknown policy, a limit below 1
// byte, steps < 1, warmup < 1 (each naming the value).
BatchSweep sweep_batches(const BatchSweepOptions& options);

// What the measured figures decide, on rows whose reports are filled: fits
// (peak_total_bytes <= memory_limit; otherwise the reason says by how
// much), samples_per_s, each policy's fastest and the fastest of all
// (ties: the first). Rows without a report keep their reason and never fit.
void judge_batches(BatchSweep& sweep);

inline constexpr std::string_view kBatchCsvHeader =
    "model,batch_size,policy,memory_limit_mib,budget_mib,resident_mib,fits,peak_total_mib,peak_activation_mib,"
    "predicted_peak_mib,step_ms,samples_per_s,replayed_nodes,chosen_by,fastest,reason";

// The header above and one line per row, every row (the input of
// tools/plot_batches.py): measured cells empty for a run that could not
// start, fits and fastest 0 or 1, the reason quoted.
std::string batch_csv(const BatchSweep& sweep);

// {"model", "memory_limit_bytes", "rows": [...], "fastest": {policy: row or
// null}, "fastest_overall": row or null}; a row has its batch, policy,
// budget, resident bytes, fits, reason, samples/s and the run's
// WorkloadReport::to_json() (null when it could not start).
nlohmann::ordered_json batch_json(const BatchSweep& sweep);

}  // namespace remat::workloads
