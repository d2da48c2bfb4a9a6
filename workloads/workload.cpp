// run_workload: W1 of docs/workloads.md; see workload.h. Here: the workloads
// planned and stepped; they are built in workload_build.cpp, their reports as
// JSON are in workload_report.cpp.
#include "workloads/workload.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <vector>

#include <fmt/ranges.h>

#include "engine/allocator.h"
#include "engine/trace.h"
#include "kernels/cpu/parallel.h"
#if REMAT_HAVE_CUDA
#include "kernels/cuda/gemm.h"
#endif
#include "nn/gpt.h"
#include "ops/ops.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "scheduler/checkpointer.h"
#include "scheduler/profile_json.h"
#include "train/limits.h"
#include "train/parse.h"
#include "train/run_files.h"
#include "workloads/workload_build.h"

namespace remat::workloads {

using namespace remat::train;  // the Trainer, its arguments and its checks
namespace {

// "AMD EPYC", from the first "model name" line of /proc/cpuinfo ("" if none).
std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (!line.starts_with("model name")) continue;
    const size_t colon = line.find(':');
    return colon == std::string::npos ? std::string() : line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "";
}

// Plans the workload's first step from a rehearsal of it on the meta device
// (Note [The first step] in scheduler/checkpointer.h).
void rehearse(scheduler::Checkpointer& checkpointer, const Workload& workload) {
  checkpointer.rehearse([&] {
    Tensor loss;
    {
      const auto recording = checkpointer.record();
      loss = workload.loss();
    }
    loss.backward();
  });
}

// plan_workload on the meta device: the model is made on the CPU (its
// initialisation reads its weights; a Llama's is made on the meta device,
// build_workload), its step rehearsed, nothing computed.
WorkloadPlan rehearse_workload(WorkloadOptions options, const scheduler::PlanOptions& plan_options) {
  scheduler::Checkpointer checkpointer(plan_options, Device::cpu());
  options.device = "cpu";
  rehearse(checkpointer, build_workload(options, true));
  REMAT_CHECK(checkpointer.next_plan(), "explain: the rehearsal of {} made no plan", options.workload);
  return {*checkpointer.profile(), *checkpointer.next_plan()};
}

}  // namespace

WorkloadPlan plan_workload(const WorkloadOptions& requested) {
  const WorkloadOptions options = resolve_budget(requested).first;
  REMAT_CHECK(options.policy != "dtr", "explain: policy dtr makes no plan to explain: it evicts at run time within "
              "its budget (run it with bench --policy dtr --budget B, which reports its evictions and rebuilds)");
  const scheduler::PlanOptions plan_options{.policy = options.policy, .budget = options.budget,
                                            .overrides = options.overrides,
                                            .solver_time_limit_s = options.solver_time_limit_s};
  const auto tell = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  const std::string what =
      options.policy + (options.budget ? fmt::format(" within {:.2f} MiB", static_cast<double>(*options.budget) /
                                                                                (1024.0 * 1024.0))
                                       : "");
  if (!options.profile_path.empty()) {  // planned from the saved profile alone: nothing runs
    scheduler::check_policy(options.policy);
    tell(fmt::format("planning {} from the profile '{}' ...", what, options.profile_path));
    scheduler::GraphProfile saved = scheduler::load_profile(options.profile_path);
    scheduler::Plan plan = scheduler::make_plan(saved, plan_options);
    return {std::move(saved), std::move(plan)};
  }
  const std::string name = describe(options.model, options.workload);
  if (device_from_name(options.device).is_meta()) {
    tell(fmt::format("rehearsing a step of {} on the meta device, then planning {} ...", name, what));
    return rehearse_workload(options, plan_options);
  }
  tell(fmt::format("running {} steps of {} on {}, then planning {} ...",
                   std::max(1, options.warmup) + 1 + scheduler::CachedPlan::kWarmPlans, name, options.device, what));
  const Workload workload = build_workload(options);
  const std::unique_ptr<optim::Optimizer> optimizer = optimizer_for(workload);
  scheduler::Checkpointer checkpointer(plan_options, device_from_name(options.device));
  // The profiling step, the steps whose warm times the plan is remade from,
  // and one under the final plan.
  for (int step = 0; step < std::max(1, options.warmup) + 1 + scheduler::CachedPlan::kWarmPlans; ++step) {
    optimizer->zero_grad();
    Tensor loss;
    {
      const auto recording = checkpointer.record();
      loss = workload.loss();
    }
    loss.backward();
    optimizer->step();
  }
  REMAT_CHECK(checkpointer.plan() && checkpointer.profile(), "plan_workload: the graph of {} changed between steps",
              describe(options.model, options.workload));
  return {*checkpointer.profile(), *checkpointer.plan()};
}

namespace {

// The phases of one step, in ms.
struct StepTimes {
  double step = 0, forward = 0, backward = 0, rest = 0, replays = 0;
};

// One workload under one policy, stepped by the caller: the report's
// figures accumulate over the timed steps.
class Run {
 public:
  Run(const WorkloadOptions& options, const std::string& policy, std::optional<int64_t> budget,
      scheduler::Overrides overrides)
      : options_(options),
        workload_(build_workload(options)),
        optimizer_(optimizer_for(workload_)),
        device_(device_from_name(options.device)),
        checkpointer_({.policy = policy, .budget = budget, .overrides = std::move(overrides),
                       .solver_time_limit_s = options.solver_time_limit_s, .first_step = options.first_step},
                      device_) {
    report_.workload = describe(options.model, options.workload);
    report_.policy = policy;
    report_.budget = budget;
    report_.threads = options.threads;
    report_.cpu = cpu_model_name();
    report_.gemm = kernels::cpu::gemm_info();
    report_.device = device_.str();
    report_.gpu = device_description(device_);
#if REMAT_HAVE_CUDA
    if (device_.is_cuda()) {
      report_.tf32 = kernels::cuda::allow_tf32();
      report_.fused_epilogues = kernels::cuda::fused_epilogues();
    }
#endif
    report_.steps = options.steps;
    report_.parameters = workload_.model->num_parameters();
    report_.profile = options.profile_path;
    if (!options.profile_path.empty()) {
      scheduler::GraphProfile saved = scheduler::load_profile(options.profile_path);
      saved_signature_ = saved.signature;
      checkpointer_.plan_from(std::move(saved));
    } else if (scheduler::rehearses_first_step(checkpointer_.options())) {
      rehearse(checkpointer_, workload_);  // the first step under the policy and within the budget too
    }
    // Timed steps all run under the final plan: with fewer warm-ups, the
    // first timed steps ran under a warm re-plan, and the peak measured
    // (theirs) was not the peak predicted (the final plan's). The count is
    // a planning policy's, whatever the policy, so that every policy's run
    // trains as many steps (the same weights under every policy).
    const int planning = options.profile_path.empty()
                             ? scheduler::CachedPlan::kWarmPlans + (options.first_step == "profile" ? 1 : 0)
                             : 0;
    warmup_ = std::max(options.warmup, planning);
    report_.warmup = warmup_;
    REMAT_CHECK(checkpointer_.steps_until_final_plan() <= warmup_, "bench: policy {} still re-plans after {} warm-up "
                "steps", policy, warmup_);
  }

  // Untimed steps first: the asked-for warm-ups, or the steps until the
  // plan is final where those are more.
  int warmup() const { return warmup_; }

  // Step `index` (warm-ups first); returns its times.
  StepTimes step(int index, bool traced) {
    Allocator& allocator = allocator_for(device_);
    const int64_t transient_before = allocator.stats().live_transient;
    std::optional<TraceRecorder> trace;
    if (traced) trace.emplace();
    ScopedPeak peak(device_);
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    optimizer_->zero_grad();
    Tensor loss;
    Clock::time_point forward_start;
    {
      const auto recording = checkpointer_.record();  // settles (and may plan from) the previous step
      forward_start = Clock::now();
      loss = workload_.loss();
    }
    synchronize(device_);  // a GPU's queued work, in the phase that queued it
    const auto forward_end = Clock::now();
    const int64_t saved = allocator.stats().live_of(MemoryCategory::Activation);
    loss.backward();
    synchronize(device_);
    const auto backward_end = Clock::now();
    optimizer_->step();
    synchronize(device_);
    const auto end = Clock::now();
    if (traced) trace->save(options_.trace_path);

    const double value = loss.item<double>();
    if (saved_signature_) check_planned_from_profile();
    if (index == 0) {
      report_.loss_first = value;
      report_.first_step_peak_activation_bytes = peak.stats().peak_transient - transient_before;
    }
    report_.loss_last = value;
    const auto ms = [](Clock::time_point from, Clock::time_point to) {
      return std::chrono::duration<double, std::milli>(to - from).count();
    };
    // A plan the Checkpointer made in record() (the warm re-plans of the
    // first steps: seconds for milp) is planning, not the step: left out
    // here, reported as the plan's planning_ms.
    const scheduler::StepReport step_report = checkpointer_.report();
    const StepTimes times{.step = ms(start, end) - step_report.planning_ms,
                          .forward = ms(forward_start, forward_end),
                          .backward = ms(forward_end, backward_end),
                          .rest = ms(start, forward_start) + ms(backward_end, end) - step_report.planning_ms,
                          .replays = step_report.recompute_ms};
    if (index < warmup_) return times;
    record_timed_step(times, peak, transient_before, saved, step_report);
    return times;
  }

  // Every step ran under the profile's plan: none was kept whole at a
  // node the plan did not expect, and none made a plan of its own.
  void check_planned_from_profile() const {
    const scheduler::Plan* plan = checkpointer_.plan();
    REMAT_CHECK(!checkpointer_.report().profiling && checkpointer_.plans_made() == 1 && plan != nullptr &&
                    plan->signature == *saved_signature_,
                "bench: --profile '{}' is the profile of another graph (signature {:016x}), not of {}'s; save one "
                "from this workload with --save-profile", options_.profile_path, *saved_signature_,
                describe(options_.model, options_.workload));
  }

  // A timed step's figures into the report: its times, its memory (the
  // allocator's since transient_before), and the Checkpointer's report.
  void record_timed_step(const StepTimes& times, const ScopedPeak& peak, int64_t transient_before, int64_t saved,
                         const scheduler::StepReport& step_report) {
    step_ms_.push_back(times.step);
    forward_ms_.push_back(times.forward);
    backward_ms_.push_back(times.backward);
    rest_ms_.push_back(times.rest);
    const MemoryStats stats = peak.stats();
    report_.saved_bytes_after_forward = saved;
    report_.peak_activation_bytes = std::max(report_.peak_activation_bytes, stats.peak_transient - transient_before);
    report_.peak_total_bytes = std::max(report_.peak_total_bytes, stats.peak_total);
    // Replays of dropped outputs (none under policy "none"): the last step's.
    report_.recompute_ms = step_report.recompute_ms;
    report_.recompute_flops = step_report.recompute_flops;
    report_.replayed_nodes = step_report.replayed_nodes;
    report_.evictions = step_report.evictions;
    report_.evicted_bytes = step_report.evicted_bytes;
    report_.rebuilds = step_report.rebuilds;
    report_.over_budget_allocations = step_report.over_budget_allocations;
    report_.max_over_budget_bytes = step_report.max_over_budget_bytes;
    report_.evicting_ms = step_report.evicting_ms;
    report_.kept_bytes = step_report.kept_bytes;
    report_.dropped_bytes = step_report.dropped_bytes;
    report_.predicted_peak_activation_bytes = step_report.predicted_peak_bytes;
    report_.predicted_recompute_ms = step_report.predicted_recompute_ms;
    report_.planned_step_ms = step_report.planned_step_ms;
    if (const scheduler::Plan* plan = checkpointer_.plan()) {
      report_.chosen_by = plan->chosen_by;
      report_.planning_ms = plan->planning_ms;
      report_.solver = plan->solver;
      report_.warnings = plan->warnings;
    }
  }

  // The profile the latest plan was made from, as JSON at `path`.
  void save_profile(const std::string& path) const {
    const scheduler::GraphProfile* profile = checkpointer_.profile();
    REMAT_CHECK(profile != nullptr, "bench: --save-profile: no graph was planned (a run of one step only profiles "
                "it; run two or more)");
    scheduler::save_profile(*profile, path);
  }

  std::string weights_digest() const {
    uint64_t hash = 0xcbf29ce484222325ull;
    for (const Tensor& p : workload_.model->parameters()) {
      const Tensor host = contiguous(to(p, Device::cpu()));
      const auto* bytes = static_cast<const unsigned char*>(host.raw_data());
      const size_t count = host.nbytes();
      for (size_t i = 0; i < count; ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
    }
    return fmt::format("{:016x}", hash);
  }

  WorkloadReport finish() {
    report_.step_ms_median = median(step_ms_);
    report_.step_ms_min = *std::min_element(step_ms_.begin(), step_ms_.end());
    report_.step_ms_max = *std::max_element(step_ms_.begin(), step_ms_.end());
    report_.forward_ms_median = median(forward_ms_);
    report_.backward_ms_median = median(backward_ms_);
    report_.rest_ms_median = median(rest_ms_);
    report_.weights_digest = weights_digest();
    return report_;
  }

 private:
  const WorkloadOptions& options_;
  Workload workload_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  Device device_;
  scheduler::Checkpointer checkpointer_;
  WorkloadReport report_;
  std::vector<double> step_ms_, forward_ms_, backward_ms_, rest_ms_;
  std::optional<uint64_t> saved_signature_;  // of the --profile planned from
  int warmup_ = 0;
};

}  // namespace

std::pair<WorkloadOptions, std::optional<int64_t>> resolve_budget(const WorkloadOptions& options) {
  if (!options.budget_fraction) return {options, std::nullopt};
  const double fraction = *options.budget_fraction;
  REMAT_CHECK(std::isfinite(fraction) && fraction > 0 && fraction <= 1, "budget: {}% of keep-all's peak is outside "
              "(0, 100]%", 100 * fraction);
  REMAT_CHECK(!options.budget, "budget: a budget in bytes and one as a share of keep-all's peak, not both");
  scheduler::check_policy(options.policy);
  REMAT_CHECK(scheduler::takes_budget(options.policy), "budget: policy {} takes no budget ({} do)", options.policy,
              scheduler::budget_policies());
  WorkloadOptions keep_all = options;
  keep_all.budget_fraction.reset();
  keep_all.policy = "none";
  keep_all.overrides = {};
  keep_all.warmup = 1;
  keep_all.trace_path.clear();
  keep_all.save_profile_path.clear();
  // Keep-all's predicted peak: a function of the graph's bytes, the same
  // from a saved profile as from a run (and the allocator's to the byte on
  // every workload measured).
  int64_t peak = 0;
  if (!keep_all.profile_path.empty()) {
    const scheduler::GraphProfile saved = scheduler::load_profile(keep_all.profile_path);
    peak = scheduler::simulate(saved, std::vector<Tag>(saved.nodes.size(), Tag::Keep)).peak_bytes;
  } else {
    if (options.progress) options.progress(fmt::format("keep-all's peak first, for a budget of {}% of it:",
                                                       100 * fraction));
    peak = plan_workload(keep_all).plan.predicted.peak_bytes;
  }
  WorkloadOptions resolved = options;
  resolved.budget_fraction.reset();
  resolved.budget = std::max<int64_t>(1, std::llround(fraction * static_cast<double>(peak)));
  return {resolved, peak};
}

WorkloadReport run_workload(const WorkloadOptions& requested) {
  const auto [options, keep_all_peak] = resolve_budget(requested);
  Run run(options, options.policy, options.budget, options.overrides);
  const int total = run.warmup() + options.steps;
  for (int step = 0; step < total; ++step) run.step(step, !options.trace_path.empty() && step + 1 == total);
  if (!options.save_profile_path.empty()) run.save_profile(options.save_profile_path);
  WorkloadReport report = run.finish();
  report.keep_all_peak_activation_bytes = keep_all_peak;
  return report;
}

PairedReport run_paired_workload(const WorkloadOptions& requested, const std::string& against) {
  scheduler::check_policy(against);
  const auto [options, keep_all_peak] = resolve_budget(requested);
  Run run(options, options.policy, options.budget, options.overrides);
  Run baseline(options, against, std::nullopt, {});
  PairedReport paired;
  std::vector<double> forward_excess, backward_excess, replays;
  // Both sides warm up alike (a planning policy's count, whatever the policy).
  const int warmup = run.warmup();
  const int total = warmup + options.steps;
  for (int step = 0; step < total; ++step) {
    // Each pair in turn order, then the other, so neither side always runs
    // on the cache state the other leaves.
    const bool traced = !options.trace_path.empty() && step + 1 == total;
    StepTimes times, baseline_times;
    if (step % 2 == 0) {
      baseline_times = baseline.step(step, false);
      times = run.step(step, traced);
    } else {
      times = run.step(step, traced);
      baseline_times = baseline.step(step, false);
    }
    if (step < warmup) continue;
    paired.time_ratios.push_back(times.step / baseline_times.step);
    forward_excess.push_back(times.forward - baseline_times.forward);
    backward_excess.push_back((times.backward - times.replays) - (baseline_times.backward - baseline_times.replays));
    replays.push_back(times.replays);
  }
  paired.overhead = {.forward_ms = median(forward_excess),
                     .backward_without_replays_ms = median(backward_excess),
                     .replays_ms = median(replays)};
  if (!options.save_profile_path.empty()) run.save_profile(options.save_profile_path);
  paired.report = run.finish();
  paired.report.keep_all_peak_activation_bytes = keep_all_peak;
  paired.baseline = baseline.finish();
  return paired;
}

}  // namespace remat::workloads
