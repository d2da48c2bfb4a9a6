// sweep_batches and its writers; see batch_sweep.h.
//
// Each run builds its workload afresh (run_workload), so no allocator state
// carries over from the run before, and the resident bytes of a batch size
// are weighed once, on a workload built for that alone. A run over the
// limit still runs to its end on the CPU (nothing stops it there): it is
// measured and marked as not fitting, with its peak, so that the table says
// by how much it missed.
#include "workloads/batch_sweep.h"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "engine/allocator.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "scheduler/plan.h"
#include "workloads/workload_build.h"

namespace remat::workloads {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double mib(int64_t bytes) { return static_cast<double>(bytes) / kMiB; }

void check_options(const BatchSweepOptions& options) {
  REMAT_CHECK(!options.batch_sizes.empty(), "tradeoff --batch-sizes: no batch sizes given (example: 8,16,32,64)");
  std::set<int64_t> seen;
  for (const int64_t batch : options.batch_sizes) {
    REMAT_CHECK(batch >= 1, "tradeoff --batch-sizes: a batch size must be at least 1, got {}", batch);
    REMAT_CHECK(seen.insert(batch).second, "tradeoff --batch-sizes: batch size {} is given twice", batch);
  }
  REMAT_CHECK(!options.policies.empty(), "tradeoff --policies: no policies given (example: none,blocks,cost,auto)");
  for (const std::string& policy : options.policies) scheduler::check_policy(policy);
  REMAT_CHECK(options.memory_limit >= 1, "tradeoff --memory-limit: must be at least 1 byte, got {}",
              options.memory_limit);
  REMAT_CHECK(options.steps >= 1, "tradeoff: steps must be at least 1, got {}", options.steps);
  REMAT_CHECK(options.warmup >= 1, "tradeoff: warmup must be at least 1 (the first step, planned again from its "
              "measured times), got {}", options.warmup);
}

std::string describe_row(const BatchSweep& sweep, const BatchRow& row) {
  std::string text = fmt::format("{} B{} {}", sweep.model, row.batch_size, row.policy);
  if (row.budget) text += fmt::format(" budget {:.2f} MiB", mib(*row.budget));
  return text;
}

std::string outcome(const BatchRow& row) {
  if (!row.report) return "does not fit: " + row.reason;
  const WorkloadReport& r = *row.report;
  return fmt::format("{}, peak {:.2f} MiB, {:.1f} ms, {:.1f} samples/s", row.fits ? "fits" : "over the limit",
                     mib(r.peak_total_bytes), r.step_ms_median, row.samples_per_s);
}

// "" for an absent value: an empty CSV cell.
std::string cell(std::optional<double> value, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value) : std::string();
}

// A CSV cell in quotes, its quotes doubled.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

nlohmann::ordered_json row_json(const BatchRow& row) {
  nlohmann::ordered_json j;
  j["batch_size"] = row.batch_size;
  j["policy"] = row.policy;
  j["budget_bytes"] = row.budget ? nlohmann::ordered_json(*row.budget) : nullptr;
  j["resident_bytes"] = row.resident_bytes;
  j["fits"] = row.fits;
  j["reason"] = row.reason;
  j["samples_per_s"] = row.samples_per_s;
  j["fastest"] = row.fastest;
  j["run"] = row.report ? row.report->to_json() : nlohmann::ordered_json(nullptr);
  return j;
}

}  // namespace

ModelSpec workload_model(const std::string& workload) {
  ModelSpec spec;
  if (workload == "W2") {
    spec.kind = "gpt";  // ModelSpec's defaults are W2's sizes
    return spec;
  }
  if (workload == "W4" || workload == "W5") return llama_workload(workload);
  REMAT_CHECK(workload == "W1", "tradeoff --batch-sizes: workload '{}' has no batch to change here (W1, W2, W4 and "
              "W5 do; for another model give --model gpt|llama|mlp or --hf)", workload);
  spec.kind = "mlp";
  spec.dims.assign(16, 1024);
  spec.dims.push_back(10);
  return spec;
}

int64_t resident_bytes(const WorkloadOptions& options) {
  Allocator& allocator = allocator_for(device_from_name(options.device));
  const int64_t before = allocator.stats().live_total;
  const Workload workload = build_workload(options);
  const int64_t built = allocator.stats().live_total - before;  // parameters (and buffers) and the batch
  int64_t gradients = 0;
  for (const Tensor& p : workload.model->parameters()) gradients += static_cast<int64_t>(p.nbytes());
  return built + gradients + optimizer_state_bytes(workload);
}

BatchSweep sweep_batches(const BatchSweepOptions& options) {
  check_options(options);
  BatchSweep sweep{.model = describe(options.model, ""), .memory_limit = options.memory_limit};
  sweep.model = sweep.model.substr(0, sweep.model.rfind(" B"));  // the batch is the row's
  const size_t runs = options.batch_sizes.size() * options.policies.size();
  for (const int64_t batch : options.batch_sizes) {
    WorkloadOptions base{.workload = "", .solver_time_limit_s = options.solver_time_limit_s,
                         .threads = options.threads, .steps = options.steps, .warmup = options.warmup,
                         .seed = options.seed, .device = options.device, .model = options.model};
    base.model.batch_size = batch;
    const int64_t resident = resident_bytes(base);
    for (const std::string& policy : options.policies) {
      BatchRow row{.batch_size = batch, .policy = policy, .resident_bytes = resident};
      WorkloadOptions run = base;
      run.policy = policy;
      if (scheduler::takes_budget(policy)) row.budget = options.memory_limit - resident;
      const size_t index = sweep.rows.size() + 1;
      const auto say = [&](const std::string& line) {
        if (options.progress) options.progress(fmt::format("[{}/{}] {}", index, runs, line));
      };
      say(describe_row(sweep, row) + " ...");
      if (row.budget && *row.budget < 1) {
        row.reason = fmt::format("the limit leaves nothing for activations: parameters, gradients, optimizer state "
                                 "and batch take {:.2f} MiB of {:.2f} MiB", mib(resident), mib(options.memory_limit));
      } else {
        run.budget = row.budget;
        try {
          row.report = run_workload(run);
        } catch (const Error& e) {
          row.reason = e.what();  // a budget below the graph's minimum: planned on the meta device, never run
        }
      }
      sweep.rows.push_back(std::move(row));
      judge_batches(sweep);
      say(describe_row(sweep, sweep.rows.back()) + ": " + outcome(sweep.rows.back()));
    }
  }
  return sweep;
}

void judge_batches(BatchSweep& sweep) {
  sweep.fastest.reset();
  std::vector<std::pair<std::string, size_t>> fastest;  // per policy, in order of appearance
  for (size_t i = 0; i < sweep.rows.size(); ++i) {
    BatchRow& row = sweep.rows[i];
    row.fastest = false;
    if (!row.report) {
      row.fits = false;
      row.samples_per_s = 0;
      continue;
    }
    const WorkloadReport& r = *row.report;
    row.samples_per_s = r.step_ms_median > 0 ? static_cast<double>(row.batch_size) * 1000.0 / r.step_ms_median : 0;
    row.fits = r.peak_total_bytes <= sweep.memory_limit;
    row.reason = row.fits ? "" : fmt::format("peak {:.2f} MiB is over the limit {:.2f} MiB", mib(r.peak_total_bytes),
                                             mib(sweep.memory_limit));
    if (!row.fits) continue;
    auto it = std::find_if(fastest.begin(), fastest.end(), [&](const auto& f) { return f.first == row.policy; });
    if (it == fastest.end()) {
      fastest.emplace_back(row.policy, i);
    } else if (row.samples_per_s > sweep.rows[it->second].samples_per_s) {
      it->second = i;
    }
    if (!sweep.fastest || row.samples_per_s > sweep.rows[*sweep.fastest].samples_per_s) sweep.fastest = i;
  }
  for (const auto& [policy, index] : fastest) sweep.rows[index].fastest = true;
}

std::string batch_csv(const BatchSweep& sweep) {
  std::string out = std::string(kBatchCsvHeader) + "\n";
  for (const BatchRow& row : sweep.rows) {
    const WorkloadReport* r = row.report ? &*row.report : nullptr;
    const auto measured = [&](auto field) -> std::optional<double> {
      return r ? std::optional<double>(field(*r)) : std::nullopt;
    };
    std::optional<double> predicted;
    if (r && r->predicted_peak_activation_bytes) predicted = mib(*r->predicted_peak_activation_bytes);
    out += fmt::format(
        "{},{},{},{:.2f},{},{:.3f},{:d},{},{},{},{},{},{},{},{:d},{}\n", sweep.model, row.batch_size,
        row.policy.find(',') == std::string::npos ? row.policy : quoted(row.policy),  // recompute-modules:a,b
        mib(sweep.memory_limit), cell(row.budget ? std::optional(mib(*row.budget)) : std::nullopt, "{:.2f}"),
        mib(row.resident_bytes), row.fits, cell(measured([](auto& x) { return mib(x.peak_total_bytes); }), "{:.3f}"),
        cell(measured([](auto& x) { return mib(x.peak_activation_bytes); }), "{:.3f}"),
        cell(predicted, "{:.3f}"),
        cell(measured([](auto& x) { return x.step_ms_median; }), "{:.3f}"),
        cell(r ? std::optional(row.samples_per_s) : std::nullopt, "{:.2f}"),
        cell(measured([](auto& x) { return static_cast<double>(x.replayed_nodes); }), "{:.0f}"),
        r ? r->chosen_by : std::string(), row.fastest, quoted(row.reason));
  }
  return out;
}

nlohmann::ordered_json batch_json(const BatchSweep& sweep) {
  nlohmann::ordered_json out;
  out["model"] = sweep.model;
  out["memory_limit_bytes"] = sweep.memory_limit;
  out["rows"] = nlohmann::ordered_json::array();
  nlohmann::ordered_json fastest = nlohmann::ordered_json::object();
  for (const BatchRow& row : sweep.rows) {
    out["rows"].push_back(row_json(row));
    if (!fastest.contains(row.policy)) fastest[row.policy] = nullptr;
    if (row.fastest) fastest[row.policy] = {{"batch_size", row.batch_size}, {"samples_per_s", row.samples_per_s}};
  }
  out["fastest"] = std::move(fastest);
  out["fastest_overall"] = sweep.fastest ? row_json(sweep.rows[*sweep.fastest]) : nlohmann::ordered_json(nullptr);
  return out;
}

}  // namespace remat::workloads
