// run_workload: W1 of ../shared/WORKLOADS.md; see workload.h.
#include "train/workload.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "engine/allocator.h"
#include "engine/trace.h"
#include "kernels/cpu/parallel.h"
#include "nn/gpt.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "optim/sgd.h"
#include "scheduler/checkpointer.h"

namespace remat::train {
namespace {

// A workload: its model, and the loss of its fixed batch (one forward).
struct Workload {
  std::shared_ptr<nn::Module> model;
  std::function<Tensor()> loss;
};

// W1: 15 x [Linear(1024, 1024) + ReLU] + Linear(1024, 10); batch 256.
Workload build_w1(Generator& generator) {
  constexpr int64_t kWidth = 1024, kHidden = 15, kClasses = 10, kBatch = 256;
  std::vector<int64_t> sizes(kHidden + 1, kWidth);
  sizes.push_back(kClasses);
  auto model = std::make_shared<nn::MLP>(sizes, generator);
  const Tensor inputs = normal({kBatch, kWidth}, 0.0, 1.0, DType::Float32, generator);
  const Tensor targets = randint(kClasses, {kBatch}, generator);
  return {model, [=] { return cross_entropy(model->forward(inputs), targets); }};
}

// W2: GPT-mini (vocabulary 256, context 128, 6 blocks, d_model 256, 4 heads,
// untied head, dropout 0); batch 16 of random tokens.
Workload build_w2(uint64_t seed) {
  const nn::GPTConfig config{.vocab_size = 256, .block_size = 128, .n_layer = 6, .n_head = 4, .n_embd = 256,
                             .dropout = 0.0, .tie_weights = false, .seed = seed};
  auto model = std::make_shared<nn::GPT>(config);
  Generator generator(seed + 2);
  const Tensor ids = randint(config.vocab_size, {16, config.block_size}, generator);
  const Tensor targets = randint(config.vocab_size, {16, config.block_size}, generator);
  return {model, [=] { return model->forward(ids, targets).loss; }};
}

}  // namespace

double median(std::vector<double> values) {
  REMAT_CHECK(!values.empty(), "median: no values");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

nlohmann::ordered_json WorkloadReport::to_json() const {
  nlohmann::ordered_json j;
  j["workload"] = workload;
  j["policy"] = policy;
  j["budget_bytes"] = budget ? nlohmann::ordered_json(*budget) : nullptr;
  j["threads"] = threads;
  j["device"] = device;
  j["steps"] = steps;
  j["step_ms_median"] = step_ms_median;
  j["step_ms_min"] = step_ms_min;
  j["step_ms_max"] = step_ms_max;
  j["saved_bytes_after_forward"] = saved_bytes_after_forward;
  j["peak_activation_bytes"] = peak_activation_bytes;
  j["predicted_peak_activation_bytes"] =
      predicted_peak_activation_bytes ? nlohmann::ordered_json(*predicted_peak_activation_bytes) : nullptr;
  j["peak_total_bytes"] = peak_total_bytes;
  j["kept_bytes"] = kept_bytes;
  j["dropped_bytes"] = dropped_bytes;
  j["replayed_nodes"] = replayed_nodes;
  j["recompute_ms"] = recompute_ms;
  j["recompute_flops"] = recompute_flops;
  j["loss_first"] = loss_first;
  j["loss_last"] = loss_last;
  j["parameters"] = parameters;
  j["engine"] = "remat";
  return j;
}

namespace {

void check_options(const WorkloadOptions& options) {
  REMAT_CHECK(options.workload == "W1" || options.workload == "W2", "bench: unknown workload '{}' (available: W1, "
              "W2)", options.workload);
  scheduler::check_policy(options.policy);  // an unknown name is an error that lists the known ones
  REMAT_CHECK(options.threads >= 1, "bench: --threads must be at least 1, got {}", options.threads);
  REMAT_CHECK(options.steps >= 1 && options.warmup >= 0, "bench: need steps >= 1 and warmup >= 0, got {} and {}",
              options.steps, options.warmup);
}

Workload build(const WorkloadOptions& options) {
  check_options(options);
  kernels::cpu::set_num_threads(options.threads);
  Generator generator(options.seed);
  return options.workload == "W1" ? build_w1(generator) : build_w2(options.seed);
}

}  // namespace

WorkloadPlan plan_workload(const WorkloadOptions& options) {
  const Workload workload = build(options);
  optim::SGD optimizer(workload.model->parameters(), {.lr = 0.01});
  scheduler::Checkpointer checkpointer(
      {.policy = options.policy, .budget = options.budget, .overrides = options.overrides});
  // Profiling step, a step under the first plan, then one under the plan
  // made from that step's warm times.
  for (int step = 0; step < std::max(1, options.warmup) + 2; ++step) {
    optimizer.zero_grad();
    Tensor loss;
    {
      const auto recording = checkpointer.record();
      loss = workload.loss();
    }
    loss.backward();
    optimizer.step();
  }
  REMAT_CHECK(checkpointer.plan() && checkpointer.profile(), "plan_workload: the graph of {} changed between steps",
              options.workload);
  return {*checkpointer.profile(), *checkpointer.plan()};
}

WorkloadReport run_workload(const WorkloadOptions& options) {
  const Workload workload = build(options);
  optim::SGD optimizer(workload.model->parameters(), {.lr = 0.01});

  WorkloadReport report;
  report.workload = options.workload;
  report.policy = options.policy;
  report.budget = options.budget;
  report.threads = options.threads;
  report.steps = options.steps;
  report.parameters = workload.model->num_parameters();

  Allocator& allocator = cpu_allocator();
  scheduler::Checkpointer checkpointer(
      {.policy = options.policy, .budget = options.budget, .overrides = options.overrides});
  std::vector<double> step_ms;
  for (int step = 0; step < options.warmup + options.steps; ++step) {
    const int64_t transient_before = allocator.stats().live_transient;
    const bool traced = !options.trace_path.empty() && step + 1 == options.warmup + options.steps;
    std::optional<TraceRecorder> trace;
    if (traced) trace.emplace();
    ScopedPeak peak;
    reset_recompute_stats();
    const auto start = std::chrono::steady_clock::now();
    optimizer.zero_grad();
    Tensor loss;
    {
      const auto recording = checkpointer.record();
      loss = workload.loss();
    }
    const int64_t saved = allocator.stats().live_of(MemoryCategory::Activation);
    loss.backward();
    optimizer.step();
    const auto end = std::chrono::steady_clock::now();
    if (traced) trace->save(options.trace_path);

    const double value = loss.item<double>();
    if (step == 0) report.loss_first = value;
    report.loss_last = value;
    if (step < options.warmup) continue;
    step_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    const MemoryStats stats = peak.stats();
    report.saved_bytes_after_forward = saved;
    report.peak_activation_bytes = std::max(report.peak_activation_bytes, stats.peak_transient - transient_before);
    report.peak_total_bytes = std::max(report.peak_total_bytes, stats.peak_total);
    // Replays of dropped outputs (none under policy "none"): the last step's.
    const scheduler::StepReport step_report = checkpointer.report();
    report.recompute_ms = step_report.recompute_ms;
    report.recompute_flops = step_report.recompute_flops;
    report.replayed_nodes = step_report.replayed_nodes;
    report.kept_bytes = step_report.kept_bytes;
    report.dropped_bytes = step_report.dropped_bytes;
    report.predicted_peak_activation_bytes = step_report.predicted_peak_bytes;
  }
  report.step_ms_median = median(step_ms);
  report.step_ms_min = *std::min_element(step_ms.begin(), step_ms.end());
  report.step_ms_max = *std::max_element(step_ms.begin(), step_ms.end());
  return report;
}

}  // namespace remat::train
