// The Checkpointer; see checkpointer.h.
#include "scheduler/checkpointer.h"

#include <fmt/format.h>

namespace remat::scheduler {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
thread_local bool t_recording = false;

bool same_block(const Node& a, const Node& b) {
  const auto& x = a.record().block;
  const auto& y = b.record().block;
  return x && y && *x == *y;
}

}  // namespace

std::string StepReport::str() const {
  std::string predicted = predicted_peak_bytes ? fmt::format("{:.2f}", *predicted_peak_bytes / kMiB) : "-";
  return fmt::format("step {}{}: policy {}{}, kept {:.2f} MiB, dropped {:.2f} MiB, peak {:.2f} MiB (predicted {}), "
                     "{} replays, {:.1f} ms, {:.3g} FLOP",
                     step, profiling ? " (profiling)" : "", policy,
                     budget ? fmt::format(" budget {:.2f} MiB", *budget / kMiB) : "", kept_bytes / kMiB,
                     dropped_bytes / kMiB, measured_peak_bytes / kMiB, predicted, replayed_nodes, recompute_ms,
                     static_cast<double>(recompute_flops));
}

Checkpointer::Checkpointer(PlanOptions options) : options_(std::move(options)) {
  check_policy(options_.policy);
  REMAT_CHECK(!options_.budget || options_.policy == "cost" || options_.policy == "optimal",
              "checkpointing: policy {} takes no budget (cost and optimal do)", options_.policy);
}

Checkpointer::Recording::Recording(Checkpointer& owner) : scope_(owner.recording_policy()) {
  REMAT_CHECK(!t_recording, "checkpointing: a Checkpointer is already recording on this thread");
  t_recording = true;
}

Checkpointer::Recording::~Recording() { t_recording = false; }

std::unique_ptr<Checkpointer::Recording> Checkpointer::record() {
  settle_last_step();
  records_.clear();
  mismatch_ = false;
  step_start_ = next_sequence_nr();
  const int64_t step = report_.step + 1;
  report_ = StepReport{.step = step, .profiling = active_ == nullptr, .policy = options_.policy,
                       .budget = options_.budget};
  if (active_) {
    report_.signature = active_->plan.signature;
    report_.kept_bytes = active_->plan.kept_bytes;
    report_.dropped_bytes = active_->plan.dropped_bytes;
    report_.predicted_peak_bytes = active_->plan.predicted.peak_bytes;
  }
  replays_at_start_ = recompute_stats();
  watch_.reset();
  watch_ = std::make_unique<TransientPeakWatch>();
  return std::make_unique<Recording>(*this);
}

RecomputePolicy Checkpointer::recording_policy() {
  RecomputePolicy policy{.tag = [this](const Node& node) { return tag_for(node); }, .keep_input = {}};
  if (!active_ && options_.policy != "none") {
    // Profiling under `blocks`: a block's output is kept when read outside it.
    policy.keep_input = [this](const Node& consumer, const Node& producer) {
      return !active_ && !same_block(consumer, producer);
    };
  }
  return policy;
}

Tag Checkpointer::tag_for(const Node& node) {
  records_.push_back(node.shared_record());
  if (!active_) return options_.policy != "none" && node.record().block ? Tag::Recompute : Tag::Keep;
  if (mismatch_) return Tag::Keep;
  const auto it = active_->position_at.find(node.record().sequence_nr - step_start_);
  if (it == active_->position_at.end()) return Tag::Keep;  // not part of the planned graph
  const NodeProfile& planned = active_->graph.nodes[it->second];
  if (planned.op != node.name() || planned.output_shape != node.record().output_shape) {
    mismatch_ = true;  // another graph: keep the rest, plan it after this step
    report_.profiling = true;
    report_.predicted_peak_bytes.reset();
    return Tag::Keep;
  }
  return active_->plan.tags[it->second];
}

void Checkpointer::settle_last_step() {
  if (records_.empty()) return;
  report_ = report();  // freeze the last step's measured figures
  if (!records_.back()->backward_ran) return;  // no backward: nothing to plan from
  GraphProfile graph = profile_records(records_);
  const bool applied = active_ && !mismatch_ && graph.signature == active_->plan.signature;
  if (applied) return;
  if (auto it = cache_.find(graph.signature); it != cache_.end()) {
    active_ = it->second;
    return;
  }
  auto cached = std::make_shared<CachedPlan>();
  for (const NodeProfile& node : graph.nodes) cached->position_at[node.sequence_nr - step_start_] = node.position;
  cached->plan = make_plan(graph, options_);
  cached->graph = std::move(graph);
  ++plans_made_;
  cache_[cached->plan.signature] = cached;
  active_ = cached;
}

StepReport Checkpointer::report() const {
  StepReport report = report_;
  if (watch_) report.measured_peak_bytes = watch_->rise();
  const RecomputeStats now = recompute_stats();
  report.replayed_nodes = now.nodes - replays_at_start_.nodes;
  report.recompute_ms = now.ms - replays_at_start_.ms;
  report.recompute_flops = now.flops - replays_at_start_.flops;
  return report;
}

const Plan* Checkpointer::plan() const { return active_ && !report_.profiling ? &active_->plan : nullptr; }
const GraphProfile* Checkpointer::profile() const { return active_ ? &active_->graph : nullptr; }

Tensor checkpoint(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs) {
  CheckpointRegion region;
  return fn(inputs);
}

}  // namespace remat::scheduler
