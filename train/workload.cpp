// run_workload: W1 of docs/workloads.md; see workload.h. Here: the workloads
// built, planned and stepped; their reports as JSON are in workload_report.cpp.
#include "train/workload.h"

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
#include "nn/gpt2_pretrained.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "scheduler/checkpointer.h"
#include "scheduler/profile_json.h"
#include "train/limits.h"
#include "train/parse.h"
#include "train/run_files.h"

namespace remat::train {
namespace {

// A workload: its model, the loss of its fixed batch (one forward), and its
// optimizer (SGD for W1 and W2, AdamW for W3, as docs/workloads.md has them).
struct Workload {
  std::shared_ptr<nn::Module> model;
  std::function<Tensor()> loss;
  bool adamw = false;
};

std::unique_ptr<optim::Optimizer> optimizer_for(const Workload& workload) {
  if (workload.adamw) return std::make_unique<optim::AdamW>(workload.model->parameters(), optim::AdamWOptions{.lr = 6e-4});
  return std::make_unique<optim::SGD>(workload.model->parameters(), optim::SGDOptions{.lr = 0.01});
}

// W1: 15 x [Linear(1024, 1024) + ReLU] + Linear(1024, 10); batch 256.
Workload build_w1(Generator& generator, Device device) {
  constexpr int64_t kWidth = 1024, kHidden = 15, kClasses = 10, kBatch = 256;
  std::vector<int64_t> sizes(kHidden + 1, kWidth);
  sizes.push_back(kClasses);
  auto model = std::make_shared<nn::MLP>(sizes, generator);
  model->to(device);
  const Tensor inputs = to(normal({kBatch, kWidth}, 0.0, 1.0, DType::Float32, generator), device);
  const Tensor targets = to(randint(kClasses, {kBatch}, generator), device);
  return {model, [=] { return cross_entropy(model->forward(inputs), targets); }};
}

// W2: GPT-mini (vocabulary 256, context 128, 6 blocks, d_model 256, 4 heads,
// untied head, dropout 0); batch 16 of random tokens.
Workload build_w2(uint64_t seed, Device device) {
  const nn::GPTConfig config{.vocab_size = 256, .block_size = 128, .n_layer = 6, .n_head = 4, .n_embd = 256,
                             .dropout = 0.0, .tie_weights = false, .seed = seed};
  auto model = std::make_shared<nn::GPT>(config);
  Generator generator(seed + 2);
  model->to(device);
  const Tensor ids = to(randint(config.vocab_size, {16, config.block_size}, generator), device);
  const Tensor targets = to(randint(config.vocab_size, {16, config.block_size}, generator), device);
  return {model, [=] { return model->forward(ids, targets).loss; }};
}

// W3: GPT-2 small (124M: vocabulary 50257, context 1024, 12 blocks, d_model
// 768, 12 heads, tied head, dropout 0); batch 8 of random tokens; AdamW. A
// GPU workload (a CPU step takes minutes).
Workload build_w3(uint64_t seed, Device device) {
  const nn::GPTConfig config{.vocab_size = 50257, .block_size = 1024, .n_layer = 12, .n_head = 12, .n_embd = 768,
                             .dropout = 0.0, .tie_weights = true, .seed = seed};
  auto model = std::make_shared<nn::GPT>(config);
  model->to(device);
  Generator generator(seed + 2);
  const Tensor ids = to(randint(config.vocab_size, {8, config.block_size}, generator), device);
  const Tensor targets = to(randint(config.vocab_size, {8, config.block_size}, generator), device);
  return {model, [=] { return model->forward(ids, targets).loss; }, true};
}

// A model of the user's (ModelSpec), on a fixed random batch.
Workload build_spec(const ModelSpec& spec, uint64_t seed, Device device) {
  Generator generator(seed + 2);
  if (spec.kind == "mlp") {
    Generator init(seed);
    auto model = std::make_shared<nn::MLP>(spec.dims, init);
    model->to(device);
    const Tensor inputs = to(normal({spec.batch_size, spec.dims.front()}, 0.0, 1.0, DType::Float32, generator), device);
    const Tensor targets = to(randint(spec.dims.back(), {spec.batch_size}, generator), device);
    return {model, [=] { return cross_entropy(model->forward(inputs), targets); }};
  }
  nn::GPTConfig config = spec.gpt;
  config.seed = seed;
  if (spec.kind == "hf") config = nn::load_gpt2_config(spec.hf_dir, seed);
  auto model = std::make_shared<nn::GPT>(config);
  if (spec.kind == "hf") nn::load_gpt2_weights(*model, spec.hf_dir);
  model->to(device);
  const Tensor ids = to(randint(config.vocab_size, {spec.batch_size, config.block_size}, generator), device);
  const Tensor targets = to(randint(config.vocab_size, {spec.batch_size, config.block_size}, generator), device);
  return {model, [=] { return model->forward(ids, targets).loss; }};
}

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

void check_spec(const ModelSpec& spec) {
  REMAT_CHECK(spec.kind == "gpt" || spec.kind == "mlp" || spec.kind == "hf", "bench: unknown --model '{}' (available: "
              "gpt, mlp, or --hf DIR)", spec.kind);
  REMAT_CHECK(spec.batch_size >= 1, "bench: --batch-size must be at least 1, got {}", spec.batch_size);
  if (spec.kind == "mlp") {
    REMAT_CHECK(spec.dims.size() >= 2, "bench: --dims needs at least an input and an output width, got {} width(s)",
                spec.dims.size());
    for (const int64_t width : spec.dims) REMAT_CHECK(width >= 1, "bench: --dims widths must be at least 1, got {}", width);
  }
  if (spec.kind == "gpt") {
    const nn::GPTConfig& c = spec.gpt;
    REMAT_CHECK(c.n_layer >= 1 && c.n_head >= 1 && c.n_embd >= 1 && c.block_size >= 1 && c.vocab_size >= 1,
                "bench: --n-layer, --n-head, --n-embd, --block-size and --vocab-size must be at least 1, got {}, {}, "
                "{}, {} and {}", c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size);
    REMAT_CHECK(c.n_embd % c.n_head == 0, "bench: --n-embd {} must be a multiple of --n-head {}", c.n_embd, c.n_head);
    REMAT_CHECK(c.dropout >= 0 && c.dropout < 1, "bench: --dropout must be in [0, 1), got {}", c.dropout);
  }
}

// `rehearsal`: the workload is rehearsed on the meta device, not run
// (plan_workload with --device meta).
void check_options(const WorkloadOptions& options, bool rehearsal) {
  if (!options.model.kind.empty()) {
    check_spec(options.model);
  } else {
    REMAT_CHECK(options.workload == "W1" || options.workload == "W2" || options.workload == "W3", "bench: unknown "
                "workload '{}' (available: W1, W2, W3, or --model gpt|mlp, --hf DIR)", options.workload);
    REMAT_CHECK(options.workload != "W3" || rehearsal || device_from_name(options.device).is_cuda(), "bench: W3 "
                "(GPT-2 124M) is a GPU workload: give --device cuda (on the CPU a step takes minutes), or explain "
                "--device meta to plan it without running it");
  }
  scheduler::check_policy(options.policy);  // an unknown name is an error that lists the known ones
  check_threads(options.threads, "bench");
  REMAT_CHECK(options.steps >= 1 && options.warmup >= 0, "bench: need steps >= 1 and warmup >= 0, got {} and {}",
              options.steps, options.warmup);
  REMAT_CHECK(rehearsal || !device_from_name(options.device).is_meta(), "bench: --device meta: a workload on the "
              "meta device computes no loss to report (meta tensors have shapes and bytes only; explain plans one)");
  check_output_path(options.save_profile_path, "--save-profile");
  // The profile of a step that ran: the first plans from a rehearsal or is
  // profiled, and its times are planned from after it.
  REMAT_CHECK(options.save_profile_path.empty() || options.warmup + options.steps >= 2, "bench: --save-profile needs "
              "two steps or more (--warmup + --steps), got {}", options.warmup + options.steps);
  check_distinct_paths({{"--profile", options.profile_path}, {"--save-profile", options.save_profile_path},
                        {"--trace", options.trace_path}});
}

Workload build(const WorkloadOptions& options, bool rehearsal = false) {
  check_options(options, rehearsal);
  kernels::cpu::set_num_threads(options.threads);
  Generator generator(options.seed);
  const Device device = device_from_name(options.device);
  if (!options.model.kind.empty()) return build_spec(options.model, options.seed, device);
  if (options.workload == "W1") return build_w1(generator, device);
  return options.workload == "W2" ? build_w2(options.seed, device) : build_w3(options.seed, device);
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
// initialisation reads its weights), its step rehearsed, nothing computed.
WorkloadPlan rehearse_workload(WorkloadOptions options, const scheduler::PlanOptions& plan_options) {
  scheduler::Checkpointer checkpointer(plan_options, Device::cpu());
  options.device = "cpu";
  rehearse(checkpointer, build(options, true));
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
  if (!options.profile_path.empty()) {  // planned from the saved profile alone: nothing runs
    scheduler::check_policy(options.policy);
    scheduler::GraphProfile saved = scheduler::load_profile(options.profile_path);
    scheduler::Plan plan = scheduler::make_plan(saved, plan_options);
    return {std::move(saved), std::move(plan)};
  }
  if (device_from_name(options.device).is_meta()) return rehearse_workload(options, plan_options);
  const Workload workload = build(options);
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
        workload_(build(options)),
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
  }

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
    const scheduler::StepReport step_report = checkpointer_.report();
    const StepTimes times{.step = ms(start, end),
                          .forward = ms(forward_start, forward_end),
                          .backward = ms(forward_end, backward_end),
                          .rest = ms(start, forward_start) + ms(backward_end, end),
                          .replays = step_report.recompute_ms};
    if (index < options_.warmup) return times;
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
  const int total = options.warmup + options.steps;
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
  const int total = options.warmup + options.steps;
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
    if (step < options.warmup) continue;
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

}  // namespace remat::train
