// The Checkpointer; see checkpointer.h.
#include "scheduler/checkpointer.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/factory.h"
#include "engine/meta.h"
#include "scheduler/policies/dtr.h"
#include "scheduler/search.h"

namespace remat::scheduler {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
thread_local bool t_recording = false;

bool same_block(const Node& a, const Node& b) {
  const auto& x = a.record().block;
  const auto& y = b.record().block;
  return x && y && *x == *y;
}

// "'h.0.attn/matmul' matmul -> (4, 16, 16) float32"
std::string describe_node(const NodeProfile& node) {
  return fmt::format("'{}' {} -> ({}) {}", node.name, node.op, fmt::join(node.output_shape, ", "),
                     dtype_name(node.output_dtype));
}

// Why `recorded` is not the graph of the profile `saved`: both signatures
// and sizes, and the first node that differs (or, where every node agrees,
// what else the signature covers).
std::string graph_difference(const GraphProfile& saved, const GraphProfile& recorded) {
  std::string differs;
  const int64_t common = std::min(saved.size(), recorded.size());
  for (int64_t v = 0; v < common && differs.empty(); ++v) {
    const NodeProfile& a = saved.nodes[v];
    const NodeProfile& b = recorded.nodes[v];
    if (a.op != b.op || a.output_shape != b.output_shape || a.output_dtype != b.output_dtype ||
        a.input_shapes != b.input_shapes || a.input_dtypes != b.input_dtypes) {
      differs = fmt::format("node {} is {} in the profile, {} in this step", v, describe_node(a), describe_node(b));
    } else if (a.inputs != b.inputs || (a.region != 0) != (b.region != 0)) {
      differs = fmt::format("node {} ({}) reads other nodes, or is in a checkpoint region in one graph only", v,
                            describe_node(b));
    }
  }
  if (differs.empty() && saved.size() != recorded.size()) {
    const GraphProfile& longer = saved.size() > recorded.size() ? saved : recorded;
    differs = fmt::format("the first {} nodes agree, then {} has {} more, from {}", common,
                          &longer == &saved ? "the profile" : "this step", longer.size() - common,
                          describe_node(longer.nodes[static_cast<size_t>(common)]));
  }
  if (differs.empty()) differs = "every node agrees in op, shapes and inputs";
  return fmt::format("the profile's graph has signature {:016x} and {} nodes, this step's {:016x} and {} nodes: {}",
                     saved.signature, saved.size(), recorded.signature, recorded.size(), differs);
}

}  // namespace

DtrFloor dtr_floor(const GraphProfile& graph) {
  // The node whose storage a value is: a view's is its base's.
  const auto storage_of = [&](int64_t v) {
    while (v >= 0 && graph.nodes[static_cast<size_t>(v)].view_of >= 0) {
      const NodeProfile& view = graph.nodes[static_cast<size_t>(v)];
      v = view.inputs[static_cast<size_t>(view.view_of)];
    }
    return v;
  };
  DtrFloor floor;
  for (const NodeProfile& node : graph.nodes) {
    int64_t bytes = node.output_bytes;
    std::vector<int64_t> read;
    for (const int64_t input : node.inputs) {
      const int64_t storage = storage_of(input);
      if (storage < 0 || std::find(read.begin(), read.end(), storage) != read.end()) continue;
      read.push_back(storage);
      bytes += graph.nodes[static_cast<size_t>(storage)].output_bytes;
    }
    if (bytes > floor.bytes) floor = {.bytes = bytes, .node = node.name};
  }
  return floor;
}

std::string StepReport::str() const {
  std::string predicted = predicted_peak_bytes ? fmt::format("{:.2f}", *predicted_peak_bytes / kMiB) : "-";
  if (policy == "dtr") {
    return fmt::format("step {}: policy dtr{}, peak {:.2f} MiB, {} evictions ({:.2f} MiB), {} rebuilds, {} replays, "
                       "{:.1f} ms, {:.3g} FLOP{}", step, budget ? fmt::format(" budget {:.2f} MiB", *budget / kMiB) : "",
                       measured_peak_bytes / kMiB, evictions, evicted_bytes / kMiB, rebuilds, replayed_nodes,
                       recompute_ms, static_cast<double>(recompute_flops),
                       over_budget_allocations > 0
                           ? fmt::format(", {} allocations over budget (by up to {:.2f} MiB)", over_budget_allocations,
                                         max_over_budget_bytes / kMiB)
                           : "");
  }
  std::string said;
  for (const std::string& warning : warnings) said += fmt::format("; warning: {}", warning);
  return fmt::format("step {}{}: policy {}{}{}, kept {:.2f} MiB, dropped {:.2f} MiB, peak {:.2f} MiB (predicted {}), "
                     "{} replays, {:.1f} ms, {:.3g} FLOP{}",
                     step, profiling ? " (profiling)" : "", policy,
                     budget ? fmt::format(" budget {:.2f} MiB", *budget / kMiB) : "",
                     minimum_budget_bytes ? fmt::format(" (minimum {:.2f} MiB)", *minimum_budget_bytes / kMiB) : "",
                     kept_bytes / kMiB,
                     dropped_bytes / kMiB, measured_peak_bytes / kMiB, predicted, replayed_nodes, recompute_ms,
                     static_cast<double>(recompute_flops), said);
}

Checkpointer::Checkpointer(PlanOptions options, Device device) : options_(std::move(options)), device_(device) {
  check_policy(options_.policy);
  check_first_step(options_.first_step);
  REMAT_CHECK((options_.policy == "custom") == static_cast<bool>(options_.custom), "checkpointing: policy {} {}",
              options_.policy, options_.custom ? "takes no rule of the caller's (give policy custom)"
                                               : "needs the caller's rule (PlanOptions::custom)");
  REMAT_CHECK(!options_.budget || takes_budget(options_.policy), "checkpointing: policy {} takes no budget ({} do)",
              options_.policy, budget_policies());
  if (options_.policy == "dtr") {
    REMAT_CHECK(options_.budget && *options_.budget > 0, "checkpointing: policy dtr needs a positive budget (the "
                "runtime cap on a step's activation bytes), e.g. {{.policy = \"dtr\", .budget = 64 << 20}}");
    pool_ = make_dtr_pool(*options_.budget, device_);
  }
}

Checkpointer::Recording::Recording(Checkpointer& owner)
    : owner_(owner), scope_(owner.step_context()) {
  REMAT_CHECK(!t_recording, "checkpointing: a Checkpointer is already recording on this thread");
  t_recording = true;
}

Checkpointer::Recording::~Recording() {
  t_recording = false;
  // On a GPU the forward's time is its kernels': wait for them (the pass
  // is timed by the GPU's events, Note [Graph events]).
  synchronize(placement(owner_.device_));
  owner_.forward_wall_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count() -
                           (first_touch_ms() - first_touch_at_start_);
}

bool Checkpointer::recording_on_this_thread() { return t_recording; }

void Checkpointer::set_device(Device device) {
  REMAT_CHECK(!t_recording, "checkpointing: set_device({}) while a step is recording", device.str());
  settle_last_step();  // the step before was measured where it ran
  records_.clear();
  watch_.reset();
  device_ = device;
  if (pool_) pool_ = make_dtr_pool(*options_.budget, device_);
}

std::unique_ptr<Checkpointer::Recording> Checkpointer::record() {
  REMAT_CHECK(!t_recording, "checkpointing: a Checkpointer is already recording on this thread (nested "
              "record(), or a checkpointed module called inside another's forward)");
  planning_ms_ = 0;
  settle_last_step();
  records_.clear();
  mismatch_ = false;
  tell_plans();  // once the Checkpointer is whole again: a Python warning may be an error
  const int64_t step = report_.step + 1;
  report_ = StepReport{.step = step, .profiling = active_ == nullptr && !pool_, .policy = options_.policy,
                       .budget = options_.budget, .planning_ms = planning_ms_};
  if (active_) report_applying(*active_);
  replays_at_start_ = profiler_->replays();
  watch_.reset();
  // The allocator the step's bytes come from: the meta one in a rehearsal.
  watch_ = std::make_unique<TransientPeakWatch>(placement(device_));
  step_start_ = mark_sequence();  // what is allocated from here on is the step's
  if (pool_ && !rehearsing_) pool_->begin_step();  // the budget counts from here, as the watch does
  return std::make_unique<Recording>(*this);
}

RecordingContext Checkpointer::step_context() {
  RecordingContext context = remat::recording_context();
  context.tagger = this;
  context.residency = rehearsing_ ? nullptr : pool_;  // a dtr rehearsal only looks at the graph
  auto observers = context.observers ? std::make_shared<GraphObservers>(*context.observers)
                                     : std::make_shared<GraphObservers>();
  observers->push_back(profiler_);
  context.observers = std::move(observers);
  return context;
}

bool Checkpointer::keep_input(const Node& consumer, const Node& producer) {
  // Profiling under `blocks` (a dtr pool keeps nothing; a plan decides itself).
  return !pool_ && !active_ && options_.policy != "none" && !same_block(consumer, producer);
}

namespace {

// Whether the node recorded `index`-th in this step is the one `plan`
// expects there (or one the plan does not know, which it leaves kept).
bool expected_by(const CachedPlan& plan, const NodeRecord& record, size_t index) {
  const auto it = plan.position_at.find(index);
  if (it == plan.position_at.end()) return true;
  const NodeProfile& planned = plan.graph.nodes[it->second];
  return planned.op == record.op && planned.output_shape == record.output_shape &&
         planned.output_dtype == record.output_dtype;
}

Tag tag_in(const CachedPlan& plan, size_t index) {
  const auto it = plan.position_at.find(index);
  return it == plan.position_at.end() ? Tag::Keep : plan.plan.tags[it->second];
}

// Where each node of `graph` was recorded in its step.
std::unordered_map<size_t, int64_t> positions(const GraphProfile& graph) {
  std::unordered_map<size_t, int64_t> position_at;
  for (const NodeProfile& node : graph.nodes) position_at[static_cast<size_t>(node.recorded_index)] = node.position;
  return position_at;
}

// The last of `steps` (profiles of one graph) with each node's forward and
// backward time, and the step's, the median over all of them; each kind of
// replay time the median over the steps that timed it, else `earlier`'s
// (the profile planned from before, whose step may have replayed what
// these did not).
GraphProfile median_times(const std::vector<GraphProfile>& steps, const GraphProfile& earlier) {
  GraphProfile result = steps.back();
  auto median_over_steps = [&](auto field) {
    std::vector<double> values;
    for (const GraphProfile& step : steps) values.push_back(field(step));
    return median(std::move(values));
  };
  for (size_t v = 0; v < result.nodes.size(); ++v) {
    result.nodes[v].forward_ms = median_over_steps([v](const GraphProfile& g) { return g.nodes[v].forward_ms; });
    result.nodes[v].backward_ms = median_over_steps([v](const GraphProfile& g) { return g.nodes[v].backward_ms; });
    auto median_of_timed = [&](double NodeProfile::*field) {
      std::vector<double> timed;
      for (const GraphProfile& step : steps) {
        if (step.nodes[v].*field > 0) timed.push_back(step.nodes[v].*field);
      }
      return timed.empty() ? earlier.nodes[v].*field : median(std::move(timed));
    };
    result.nodes[v].replay_ms = median_of_timed(&NodeProfile::replay_ms);
    result.nodes[v].replay_in_place_ms = median_of_timed(&NodeProfile::replay_in_place_ms);
  }
  result.step_ms = median_over_steps([](const GraphProfile& g) { return g.step_ms; });
  return result;
}

}  // namespace

// Whether `plan` could have been the one applied to the nodes recorded so
// far in this step: the same ops and shapes at the same places, the same tags.
bool Checkpointer::fits_so_far(const CachedPlan& plan) const {
  for (size_t i = 0; i < records_.size(); ++i) {
    const NodeRecord& record = *records_[i];
    if (!expected_by(plan, record, i)) return false;
    const bool tagged = i + 1 < records_.size();  // the node being recorded has no tag yet
    if (tagged && tag_in(plan, i) != record.tag) return false;
  }
  return true;
}

Tag Checkpointer::tag(const Node& node) {
  records_.push_back(node.shared_record());
  if (rehearsing_) return Tag::Keep;  // dtr's rehearsal: the graph alone
  if (pool_) return Tag::Recompute;  // dtr: the pool decides, at run time
  if (mismatch_) return Tag::Keep;
  if (!active_) return options_.policy != "none" && node.record().block ? Tag::Recompute : Tag::Keep;
  const size_t index = records_.size() - 1;
  if (!expected_by(*active_, node.record(), index)) {
    // Another graph than the one planned: a cached plan that fits what was
    // recorded so far takes over; if none does, the rest of the step is
    // kept and this graph is planned after it.
    std::shared_ptr<CachedPlan> fitting;
    for (const auto& [signature, cached] : cache_) {
      if (cached != active_ && fits_so_far(*cached)) fitting = cached;
    }
    if (!fitting) {
      mismatch_ = true;
      report_.profiling = true;
      report_.predicted_peak_bytes.reset();
      report_.predicted_recompute_ms.reset();
      report_.planned_step_ms.reset();
      report_.minimum_budget_bytes.reset();
      report_.warnings.clear();
      return Tag::Keep;
    }
    active_ = fitting;
    report_applying(*active_);
  }
  return tag_in(*active_, index);
}

void Checkpointer::report_applying(const CachedPlan& cached) {
  const Plan& plan = cached.plan;
  report_.signature = plan.signature;
  report_.kept_bytes = plan.kept_bytes;
  report_.dropped_bytes = plan.dropped_bytes;
  report_.predicted_peak_bytes = plan.predicted.peak_bytes;
  report_.predicted_recompute_ms = plan.predicted.recompute_ms;
  report_.minimum_budget_bytes = plan.minimum_budget_bytes;
  report_.planned_step_ms = cached.graph.training_step_ms();
  report_.warnings = plan.warnings;
}

void Checkpointer::settle_last_step() {
  if (records_.empty()) return;
  report_ = report();  // freeze the last step's measured figures
  if (pool_) return;     // dtr: nothing to plan
  if (!profiler_->measured(*records_.back()).backward_ran) return;  // no backward: nothing to plan from
  profiler_->resolve();  // a GPU's times, read now that the step has run
  GraphProfile graph = profile_records(records_, *profiler_, step_start_);
  // The step's wall time as far as it can be seen from here: the recorded
  // forward and the backward pass, less that step's replays and, as node
  // times leave them out, its first touches of fresh memory (W2's first
  // step under a new plan spent 57 ms of its 1.26 s mapping pages, and the
  // no-budget plan of `cost` had been priced against that).
  const NodeMeasures pass = profiler_->measured(*records_.back());
  if (pass.backward_pass_ms > 0) {
    graph.step_ms = forward_wall_ms_ + pass.backward_pass_ms - pass.backward_pass_replay_ms -
                    pass.backward_pass_first_touch_ms;
  }
  check_saved_graph(graph);
  const bool applied = active_ && !mismatch_ && graph.signature == active_->plan.signature;
  if (applied && !active_->frozen && static_cast<int>(active_->warm_steps.size()) < CachedPlan::kWarmPlans) {
    // The plan came from the graph's profiling step, whose times are cold,
    // or from fewer warm steps than it will be: plan once more from the
    // median times of the warm steps so far.
    active_->position_at = positions(graph);
    active_->warm_steps.push_back(std::move(graph));
    active_->graph = median_times(active_->warm_steps, active_->graph);
    // The plan being applied competes: a budget it meets is never refused
    // by a re-plan from other times, and it stays unless a faster one fits.
    const std::vector<std::string> told = active_->plan.warnings;
    active_->plan = make_plan(active_->graph, options_, &active_->plan.tags);
    planning_ms_ += active_->plan.planning_ms;
    if (active_->plan.warnings != told) untold_.push_back(active_);  // said once, unless what it says changed
  }
  if (applied) {
    ++active_->steps;
    return;
  }
  if (auto it = cache_.find(graph.signature); it != cache_.end()) {
    active_ = it->second;
    ++active_->steps;
    return;
  }
  auto cached = std::make_shared<CachedPlan>();
  cached->position_at = positions(graph);
  cached->plan = make_plan(graph, options_);
  planning_ms_ += cached->plan.planning_ms;
  cached->steps = 1;
  untold_.push_back(cached);
  cached->graph = std::move(graph);
  ++plans_made_;
  cache_[cached->plan.signature] = cached;
  active_ = cached;
}

void Checkpointer::tell_plans() {
  const std::vector<std::shared_ptr<const CachedPlan>> untold = std::exchange(untold_, {});
  if (!options_.on_plan) return;
  for (const auto& cached : untold) options_.on_plan(cached->plan);
}

void Checkpointer::plan_from(GraphProfile graph) {
  REMAT_CHECK(!t_recording, "checkpointing: plan_from while a step is recording");
  REMAT_CHECK(!pool_, "checkpointing: policy dtr makes no plan, so a saved profile has nothing to plan (leave the "
              "profile out: dtr evicts at run time within its budget)");
  auto cached = std::make_shared<CachedPlan>();
  cached->position_at = positions(graph);
  cached->plan = make_plan(graph, options_);  // a budget below the minimum fails here, before any step
  cached->graph = std::move(graph);
  cached->frozen = true;
  ++plans_made_;
  cache_[cached->plan.signature] = cached;
  active_ = cached;
  unchecked_profile_ = cached;
  untold_.push_back(cached);
  tell_plans();
}

void Checkpointer::check_saved_graph(const GraphProfile& recorded) {
  if (!unchecked_profile_) return;
  REMAT_CHECK(recorded.signature == unchecked_profile_->plan.signature, "checkpointing: the saved profile planned "
              "from is of another graph than this model's step (saved from another model, batch or block size?): "
              "{}. Save a profile of this run (--save-checkpointing-profile) or leave the profile out",
              graph_difference(unchecked_profile_->graph, recorded));
  unchecked_profile_.reset();
}

namespace {

// `graph` as a rehearsal saw it, its times dropped: they were the
// bookkeeping of ops that computed nothing. Steps that ran replace them.
GraphProfile without_times(GraphProfile graph) {
  for (NodeProfile& node : graph.nodes) {
    node.forward_ms = node.backward_ms = node.replay_ms = node.replay_in_place_ms = 0;
  }
  graph.step_ms = 0;
  return graph;
}

}  // namespace

void Checkpointer::rehearse(const std::function<void()>& step) {
  REMAT_CHECK(!t_recording, "checkpointing: rehearse while a step is recording");
  if (pool_) {
    rehearse_dtr(step);
    return;
  }
  settle_last_step();  // a real step before it is planned first
  records_.clear();
  const StepReport before = report_;
  auto restore = [&, active = active_] {
    records_.clear();
    watch_.reset();
    mismatch_ = false;
    report_ = before;
    active_ = active;
  };
  try {
    {
      MetaScope meta;
      step();
    }
    REMAT_CHECK(!records_.empty() && profiler_->measured(*records_.back()).backward_ran, "checkpointing: the rehearsed "
                "step recorded no forward under record(), or ran no backward from its loss");
    GraphProfile graph = profile_records(records_, *profiler_, step_start_);
    check_saved_graph(graph);
    std::shared_ptr<CachedPlan> planned;
    if (auto it = cache_.find(graph.signature); it != cache_.end()) {
      planned = it->second;
    } else {
      planned = std::make_shared<CachedPlan>();
      planned->position_at = positions(graph);
      planned->plan = make_plan(search::roofline_times(graph), options_);  // may refuse the budget
      untold_.push_back(planned);
      planned->graph = without_times(std::move(graph));
      ++plans_made_;
      cache_[planned->plan.signature] = planned;
    }
    restore();
    active_ = planned;
  } catch (...) {
    restore();
    untold_.clear();
    throw;
  }
  tell_plans();
}

// dtr plans nothing, so its rehearsal only records the step's graph (kept
// whole, outside the pool) for its floor: a budget below it is refused now
// rather than exceeded at every step.
void Checkpointer::rehearse_dtr(const std::function<void()>& step) {
  const StepReport before = report_;
  auto restore = [&] {
    records_.clear();
    watch_.reset();
    report_ = before;
    rehearsing_ = false;
  };
  DtrFloor floor;
  rehearsing_ = true;
  try {
    {
      MetaScope meta;
      step();
    }
    REMAT_CHECK(!records_.empty() && profiler_->measured(*records_.back()).backward_ran, "checkpointing: the rehearsed "
                "step recorded no forward under record(), or ran no backward from its loss");
    floor = dtr_floor(profile_records(records_, *profiler_, step_start_));
  } catch (...) {
    restore();
    throw;
  }
  restore();
  REMAT_CHECK(*options_.budget >= floor.bytes, "checkpointing: policy dtr's budget of {} bytes ({:.2f} MiB) cannot "
              "hold this step: node '{}' alone needs {} bytes ({:.2f} MiB) at once, its output and the values it reads, "
              "the floor below which no eviction goes; give a budget of at least {} bytes", *options_.budget,
              static_cast<double>(*options_.budget) / kMiB, floor.node, floor.bytes,
              static_cast<double>(floor.bytes) / kMiB, floor.bytes);
}

StepReport Checkpointer::report() const {
  StepReport report = report_;
  if (watch_) report.measured_peak_bytes = watch_->rise();
  const ReplayStats now = profiler_->replays();
  report.replayed_nodes = now.nodes - replays_at_start_.nodes;
  report.recompute_ms = now.ms - replays_at_start_.ms;
  report.recompute_flops = now.flops - replays_at_start_.flops;
  if (pool_ && watch_) {
    const EvictionStats& stats = pool_->stats();
    report.evictions = stats.evictions;
    report.evicted_bytes = stats.evicted_bytes;
    report.rebuilds = stats.rebuilds;
    report.over_budget_allocations = stats.over_budget_allocations;
    report.max_over_budget_bytes = stats.max_over_budget_bytes;
    report.evicting_ms = stats.evicting_ms;
  }
  return report;
}

int Checkpointer::steps_until_final_plan() const {
  if (pool_ || options_.policy == "none") return 0;
  const int settling = records_.empty() ? 0 : 1;  // the step that ran, planned from in the next record()
  if (!active_) return 1 + CachedPlan::kWarmPlans - settling;
  if (active_->frozen) return 0;
  return std::max(0, CachedPlan::kWarmPlans - static_cast<int>(active_->warm_steps.size()) - settling);
}

const Plan* Checkpointer::plan() const { return active_ && !report_.profiling ? &active_->plan : nullptr; }
const GraphProfile* Checkpointer::profile() const {
  const CachedPlan* most = active_.get();
  for (const auto& [signature, cached] : cache_) {
    if (most == nullptr || cached->steps > most->steps) most = cached.get();
  }
  return most ? &most->graph : nullptr;
}

Tensor checkpoint(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs) {
  CheckpointRegion region;
  return fn(inputs);
}

}  // namespace remat::scheduler
