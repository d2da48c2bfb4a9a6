// The Checkpointer: profiles a training step's graph, plans it under a
// policy and budget, caches the plan under the graph's signature, and
// applies it to the next steps as they are recorded.
//
//   Checkpointer checkpointer({.policy = "cost", .budget = 64 << 20});
//   for (...) {
//     Tensor loss;
//     { auto recording = checkpointer.record(); loss = model.forward(ids, targets).loss; }
//     loss.backward();
//     optimizer.step();
//     checkpointer.report();   // kept/dropped bytes, predicted and measured peak, replays
//   }
//
// Note [The first step]: a graph has no plan before its first step. The
// training loops (train::Trainer, bench, tradeoff) plan it before that step
// from a rehearsal on the meta device (rehearse: shapes and bytes, nothing
// computed, nominal times), for every policy that plans, so the first
// measured step already runs the policy asked for and within its budget;
// or from a saved profile (plan_from). Asked for by name (PlanOptions::
// first_step "profile"), or in a loop of the caller's that rehearses
// nothing, the first step is the profiling step instead: it runs under
// `blocks` (keep-all when the policy is none), not under the budget, and
// records what the planner reads (scheduler/profile.h). From the next
// record() on, the plan is applied: the tag policy maps each recorded node,
// by its position
// in recording order (on the recording thread: other threads' nodes do not
// shift it), to the plan's tag, after checking that op, output shape and
// dtype are the ones planned. At the first node that differs the rest of the step is
// kept (never a plan misapplied to another graph) and the step's
// graph is planned, or its plan found in the cache, for the next step. The
// first step's times are cold, so a graph is planned again after each of
// the first CachedPlan::kWarmPlans steps its plan ran on, from their median
// times.
//
// Policy dtr (scheduler/policies/dtr.h) plans nothing and profiles nothing
// first: every step records into its ResidentPool (engine/eviction.h, Note
// [Eviction]), which evicts resident values when an allocation would take
// the step's transient bytes over the budget and rebuilds them on demand.
// Its budget is required; graphs may change from step to step at no cost
// (there is no plan to invalidate). A step that finds nothing left to evict
// goes on over the budget, and its report counts that (over_budget_*).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/allocator.h"
#include "engine/eviction.h"
#include "scheduler/plan.h"
#include "scheduler/profiler.h"

namespace remat::scheduler {

struct StepReport {
  int64_t step = 0;  // 1, 2, ... records made by this checkpointer
  bool profiling = true;  // no plan was applied (a new graph, or one that changed)
  std::string policy;
  std::optional<int64_t> budget;
  uint64_t signature = 0;
  int64_t kept_bytes = 0, dropped_bytes = 0;  // of what backward reads, under the plan
  std::optional<int64_t> predicted_peak_bytes;
  // What the plan was priced at: its replays' time, and the step time of the
  // profile it was made from (training_step_ms; `cost` without a budget
  // weighs the replays against it, other policies ignore it).
  std::optional<double> predicted_recompute_ms, planned_step_ms;
  // The graph's minimum feasible budget (Plan::minimum_budget_bytes).
  std::optional<int64_t> minimum_budget_bytes;
  int64_t measured_peak_bytes = 0;  // allocator: transient rise from record() until now
  int64_t replayed_nodes = 0;
  double recompute_ms = 0;
  int64_t recompute_flops = 0;
  // Policy dtr only (engine/eviction.h): storages evicted and their bytes,
  // rebuilds of evicted values, allocations that went over the budget with
  // nothing left to evict, and the largest excess they asked for.
  int64_t evictions = 0, evicted_bytes = 0, rebuilds = 0;
  int64_t over_budget_allocations = 0, max_over_budget_bytes = 0;
  double evicting_ms = 0;  // choosing and freeing victims
  // make_plan's wall time inside this step's record(): the plan or re-plan
  // made from the step before (a new graph, CachedPlan::kWarmPlans), 0 in
  // most steps. Planning, not the step: a step's timer leaves it out
  // (workloads/workload.cpp), and Plan::planning_ms reports it.
  double planning_ms = 0;
  // The plan's warnings (Plan::warnings): it drops nothing, or its budget
  // binds nothing. str() ends with them.
  std::vector<std::string> warnings;
  std::string str() const;
};

struct CachedPlan {
  GraphProfile graph;
  Plan plan;
  // Node recorded i-th in a step (counting only this thread's recording) ->
  // its position in `graph`.
  std::unordered_map<size_t, int64_t> position_at;
  // Planned again after each of the first kWarmPlans steps run under a
  // plan (their times are warm; the profiling step's are not), from the
  // median of those steps' times: one step's timer noise would move it.
  // With the profiling step, kWarmPlans + 1 steps precede the final plan
  // (bench's 3 warm-ups cover them).
  static constexpr int kWarmPlans = 2;
  std::vector<GraphProfile> warm_steps;
  // Planned from a saved profile (Checkpointer::plan_from): kept as it is,
  // never re-planned from this run's times, so that a plan made from a
  // profile is the same on every run and every machine.
  bool frozen = false;
  int64_t steps = 0;  // steps that ran this graph (profile(): the one most ran)
};

// The Checkpointer is the Tagger of the steps it records (engine/recording.h).
class Checkpointer final : public Tagger {
 public:
  // `device`: where its steps run, whose allocator measures them.
  explicit Checkpointer(PlanOptions options, Device device = Device::cpu());
  // The context it installs while recording points at it: it stays put.
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Opens the recording of one forward: until it is destroyed, nodes are
  // tagged by the plan. One at a time per thread.
  class Recording {
   public:
    explicit Recording(Checkpointer& owner);
    ~Recording();
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;

   private:
    Checkpointer& owner_;
    // The step's context: owner_ tags, owner_'s Profiler listens, and
    // (dtr) owner_'s pool holds outputs resident.
    RecordingScope scope_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
    double first_touch_at_start_ = first_touch_ms();
  };
  [[nodiscard]] std::unique_ptr<Recording> record();
  // Plans the graph of a saved profile (scheduler/profile_json.h) now, so
  // that its first step runs under the plan, not as a profiling step: the
  // budget holds from the first step, and a budget below the graph's
  // minimum is an error here, before any step. The plan stays as the
  // profile made it (no re-plans from this run's times: CachedPlan::frozen).
  // The first graph recorded after it (a rehearsal's, else the first
  // step's) must be the profile's: one that is not (a profile saved from
  // another model or batch) is an error naming both signatures and the
  // first node that differs, never a run that goes on unplanned. After
  // that first match, a step of another graph (an epoch's smaller last
  // batch) is kept and planned as usual.
  void plan_from(GraphProfile graph);
  // Plans the graph of `step` before it runs, from shapes and bytes alone:
  // `step` (a forward under record() and the backward from its loss, as
  // the training loop runs them) runs once inside a MetaScope
  // (engine/meta.h: meta tensors, no arithmetic, no real tensor or random
  // generator changed), and its graph is planned with nominal times
  // (search::roofline_times) where none were measured. The next step runs
  // under the plan, within the budget; a budget below the graph's minimum
  // is an error here, before any step, and leaves the Checkpointer as it
  // was. Measured times replace the nominal ones from that step on (the
  // warm re-plans). Nothing to plan (policy none) is no error: the step
  // still rehearses, and is kept whole. Policy dtr plans nothing either,
  // but its rehearsal finds the floor no eviction goes below (dtr_floor):
  // a budget under it is an error naming both, before any step.
  //   checkpointer.rehearse([&] {
  //     Tensor loss;
  //     { auto recording = checkpointer.record(); loss = model.forward(ids, targets).loss; }
  //     loss.backward();
  //   });
  void rehearse(const std::function<void()>& step);
  static bool recording_on_this_thread();

  // Tagger: a node's tag by the plan (or the profiling step's rule); under
  // the profiling step's `blocks`, a block's output is kept once read
  // outside it.
  Tag tag(const Node& node) override;
  bool keep_input(const Node& consumer, const Node& producer) override;

  // The latest step's report, its measured peak counted up to now.
  StepReport report() const;
  const PlanOptions& options() const { return options_; }
  Device device() const { return device_; }
  void set_device(Device device);  // between steps (Module::to)
  // The plan applied to the latest step (null for a profiling step).
  const Plan* plan() const;
  // The plan the next step runs under (after rehearse or plan_from, before
  // any step: theirs), or null where none is made yet.
  const Plan* next_plan() const { return active_ ? &active_->plan : nullptr; }
  // The profile of the graph most steps ran (the one planned for the next
  // step where none ran more): what a run saves for the next, which an
  // epoch's short last batch, another graph, does not displace.
  const GraphProfile* profile() const;
  size_t cached_plans() const { return cache_.size(); }
  int64_t plans_made() const { return plans_made_; }
  // The steps, from the next one, that run under a plan a later record()
  // still replaces, where every step runs the same graph: 0 under none and
  // dtr (nothing to re-plan) and for a plan from a saved profile; else the
  // warm re-plans still to come (CachedPlan::kWarmPlans after rehearse),
  // after the profiling step where no plan is made yet. A benchmark times
  // none of them, so that its times and its peak are one plan's.
  int steps_until_final_plan() const;

 private:
  // Plans (or finds) the graph recorded by the last step, once its backward ran.
  void settle_last_step();
  bool fits_so_far(const CachedPlan& plan) const;
  // The step's report takes the figures of the plan it now applies.
  void report_applying(const CachedPlan& cached);
  // PlanOptions::on_plan of each plan made since it was last called, once
  // the Checkpointer's state is whole: the hook may throw (a Python warning
  // taken as an error) and must leave nothing half done.
  void tell_plans();
  // The recording context of a step: this tagger, its Profiler, its pool.
  RecordingContext step_context();

  PlanOptions options_;
  Device device_;
  std::map<uint64_t, std::shared_ptr<CachedPlan>> cache_;
  std::shared_ptr<CachedPlan> active_;  // the plan tried on the current step
  bool mismatch_ = false;
  std::vector<std::shared_ptr<const NodeRecord>> records_;
  StepReport report_;
  // Measures every step it records (its nodes keep it: Note [Graph events]).
  std::shared_ptr<Profiler> profiler_ = std::make_shared<Profiler>();
  ReplayStats replays_at_start_;
  double forward_wall_ms_ = 0;  // the latest Recording's lifetime, less its first touches: the step's forward
  uint64_t step_start_ = InputSource::kNone;  // mark_sequence() at the latest record()
  std::unique_ptr<TransientPeakWatch> watch_;
  int64_t plans_made_ = 0;
  double planning_ms_ = 0;  // make_plan's time since the latest record() began (StepReport::planning_ms)
  std::shared_ptr<ResidentPool> pool_;  // policy dtr: the pool its steps record into
  std::vector<std::shared_ptr<const CachedPlan>> untold_;  // plans on_plan has not heard of yet
  // plan_from's plan, until the first graph recorded after it is checked
  // against its profile (check_saved_graph).
  std::shared_ptr<const CachedPlan> unchecked_profile_;
  void check_saved_graph(const GraphProfile& recorded);
  void rehearse_dtr(const std::function<void()>& step);
  bool rehearsing_ = false;  // a dtr rehearsal: recorded without the pool
};

// Policy dtr's floor on `graph`: the most bytes one node needs at once
// while it runs, its output and the step's values it reads (a view's
// storage once), which every eviction schedule holds at that node, and
// the node that needs them. No budget below it holds.
struct DtrFloor {
  int64_t bytes = 0;
  std::string node;
};
DtrFloor dtr_floor(const GraphProfile& graph);

// Runs fn(inputs) in a checkpoint region (engine's CheckpointRegion): what
// fn records is replayed in backward, its output kept once read outside.
Tensor checkpoint(const std::function<Tensor(const Tensors&)>& fn, const Tensors& inputs);

}  // namespace remat::scheduler
