// The planners; see plan.h. The pieces they share are in search.h, the
// optimal policy in optimal.cpp.
#include "scheduler/plan.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include <fmt/format.h>

#include "scheduler/search.h"

namespace remat::scheduler {
namespace {

using namespace search;

// `cost` without a budget spends at most this share of a training step on
// replays (GraphProfile::training_step_ms: forward and backward as the
// Checkpointer timed them, the engine's own work between nodes included).
constexpr double kNoBudgetReplayShare = 0.05;
// ... and plans for this part of it. Replay prices and the step's time each
// move by a few percent from run to run, and measured steps cost what the
// replays cost (W2: the paired overhead tracks the replay clock to within
// its noise), so a plan priced at the whole share would overrun it in about
// half of the runs.
constexpr double kNoBudgetAim = 0.9;

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::vector<Tag> cost_tags(const Context& c, std::optional<int64_t> budget, const std::vector<Candidate>& extra,
                           std::string& why) {
  const std::vector<Candidate> greedy = greedy_path(c);
  if (!budget) {
    // No budget: the lowest memory among the plans tried whose replays cost
    // at most kNoBudgetReplayShare of the measured step. The greedy order
    // drops memory-bound values first (most bytes per ms), GEMMs only if
    // cheap; the chain's front combines its stages' plans per stage.
    const double allowance = kNoBudgetAim * kNoBudgetReplayShare * c.graph.training_step_ms();
    std::vector<Candidate> pool = descent(c, greedy);
    std::vector<Candidate> front = chain_front_plans(c, greedy);
    pool.insert(pool.end(), std::make_move_iterator(front.begin()), std::make_move_iterator(front.end()));
    const Candidate* chosen = &pool.front();  // keep-all
    for (const Candidate& candidate : pool) {
      if (candidate.sim.recompute_ms <= allowance && better(candidate.sim, chosen->sim)) chosen = &candidate;
    }
    why = fmt::format("replays within {:.0f}% of the step, aiming at {:.1f}% ({:.1f} of {:.1f} ms)",
                      100 * kNoBudgetReplayShare, 100 * kNoBudgetAim * kNoBudgetReplayShare, chosen->sim.recompute_ms,
                      allowance);
    return chosen->tags;
  }
  std::vector<Candidate> pool = descent(c, greedy);
  pool.insert(pool.end(), extra.begin(), extra.end());
  const Candidate* best = fastest_fitting(pool, planning_target(*budget));
  REMAT_CHECK(best, "plan: cost found no plan within {} bytes among {} (make_plan checked that one fits)", *budget,
              pool.size());
  why = best->origin;
  return best->tags;
}

std::string reason(const Context& c, const std::string& policy, const std::vector<Tag>& tags, int64_t v,
                   const std::string& detail) {
  const NodeProfile& node = c.graph.nodes[v];
  const bool keep = tags[v] == Tag::Keep;
  if (c.forced[v]) return keep ? "kept by a user rule (must-keep or a checkpoint region's output)"
                               : "replayed by a user rule (must-recompute or inside a checkpoint region)";
  if (node.view_of >= 0) return keep ? "a view: holds no bytes of its own" : "a view of a dropped value: dropped too";
  if (v == c.root()) return "the root: backward starts from it";
  if (!c.read[v]) {
    return keep ? "no backward reads it: freed after forward"
                : "no backward reads it, but a dropped value replays from it: dropped and replayed too";
  }
  if (policy == "none") return "policy none keeps every output";
  if (policy == "blocks") {
    if (node.block.empty()) return "outside any block: kept";
    return keep ? fmt::format("output of block {}, read after it: kept (a checkpoint)", node.block)
                : fmt::format("inside block {}: replayed in backward", node.block);
  }
  const std::string price = fmt::format("{:.3f} ms/MiB", node.ms_per_mib());
  if (policy == "cost") {
    const char* kind = node.compute_bound ? "compute-bound" : "memory-bound";
    return fmt::format("{} ({}): {} ({})", kind, price, keep ? "kept" : "replayed", detail);
  }
  if (policy == "sqrt") return keep ? "a cut of the chain, every ~sqrt: kept" : "between sqrt cuts: replayed";
  return fmt::format("{} ({}; plan: {})", keep ? "kept" : "replayed", price, detail);
}

// A rule naming an op the graph does not have is a typo, not a no-op.
void check_overrides(const GraphProfile& graph, const Overrides& overrides) {
  std::vector<std::string> ops;
  for (const NodeProfile& node : graph.nodes) {
    if (!contains(ops, node.op)) ops.push_back(node.op);
  }
  for (const auto& [rule, names] : {std::pair{"must-keep", &overrides.must_keep},
                                    std::pair{"must-recompute", &overrides.must_recompute}}) {
    for (const std::string& name : *names) {
      REMAT_CHECK(contains(ops, name), "plan: the {} rule names op '{}', which this graph does not have (its ops: "
                  "{})", rule, name, fmt::join(ops, ", "));
    }
  }
}

}  // namespace

std::vector<std::string> policy_names() { return {"none", "blocks", "sqrt", "cost", "optimal", "dtr"}; }

void check_policy(const std::string& name) {
  REMAT_CHECK(contains(policy_names(), name), "unknown recompute policy '{}' (available: {})", name,
              fmt::join(policy_names(), ", "));
}

std::vector<std::optional<Tag>> forced_tags(const GraphProfile& graph, const Overrides& overrides) {
  const auto consumers = consumers_of(graph);
  std::vector<std::optional<Tag>> forced(graph.size());
  for (const NodeProfile& node : graph.nodes) {
    if (contains(overrides.must_keep, node.op)) forced[node.position] = Tag::Keep;
    if (contains(overrides.must_recompute, node.op)) forced[node.position] = Tag::Recompute;
    if (node.region != 0) {
      const auto& users = consumers[node.position];
      const bool read_outside = std::any_of(users.begin(), users.end(),
                                            [&](int64_t u) { return graph.nodes[u].region != node.region; });
      forced[node.position] = read_outside ? Tag::Keep : Tag::Recompute;
    }
  }
  return forced;
}

std::vector<bool> read_by_backward(const GraphProfile& graph) {
  std::vector<bool> read(graph.size(), false);
  for (const NodeProfile& node : graph.nodes) {
    for (int slot : node.saved) {
      if (slot == kSavedOutput) read[node.position] = true;
      if (slot >= 0 && node.inputs[slot] >= 0) read[node.inputs[slot]] = true;
    }
  }
  // A view that is read keeps its base's storage alive: the base is read.
  for (int64_t v = graph.size(); v-- > 0;) {
    const NodeProfile& node = graph.nodes[v];
    if (read[v] && node.view_of >= 0 && node.inputs[node.view_of] >= 0) read[node.inputs[node.view_of]] = true;
  }
  return read;
}

Plan finish_plan(const GraphProfile& graph, Plan plan) {
  plan.tags = effective_tags(graph, std::move(plan.tags));
  plan.signature = graph.signature;
  plan.predicted = simulate(graph, plan.tags);
  const std::vector<bool> read = read_by_backward(graph);
  for (int64_t v = 0; v < graph.size(); ++v) {
    if (!read[v]) continue;
    (plan.tags[v] == Tag::Keep ? plan.kept_bytes : plan.dropped_bytes) += graph.nodes[v].output_bytes;
  }
  return plan;
}

Plan make_plan(const GraphProfile& graph, const PlanOptions& options, const std::vector<Tag>* current) {
  check_policy(options.policy);
  REMAT_CHECK(options.policy != "dtr", "plan: policy dtr makes no plan: it evicts at run time within its budget "
              "(scheduler/policies/dtr.h; a Checkpointer, or bench --policy dtr, runs it)");
  REMAT_CHECK(!options.budget || *options.budget > 0, "plan: the budget must be positive, got {} bytes",
              *options.budget);
  REMAT_CHECK(!options.budget || options.policy == "cost" || options.policy == "optimal",
              "plan: policy {} takes no budget (cost and optimal do)", options.policy);
  check_overrides(graph, options.overrides);
  const auto start = std::chrono::steady_clock::now();
  const Context c(graph, options.overrides);
  Plan plan{.policy = options.policy, .budget = options.budget};
  std::string detail;
  if (options.policy == "none") plan.tags = c.with_forced(std::vector<Tag>(graph.size(), Tag::Keep));
  if (options.policy == "blocks") plan.tags = blocks_tags(c);
  if (options.policy == "sqrt") plan.tags = sqrt_tags(c);
  // Note [Budgets from bytes alone] (search.h): the minimum comes from plans
  // searched on nominal times; a budget it fits, or that the plan a re-plan
  // replaces fits, is planned, any other is refused, whatever the clock says.
  std::vector<Candidate> extra = least_memory_plans(c, options.overrides);
  for (const Candidate& candidate : extra) {
    plan.minimum_peak_bytes = std::min(plan.minimum_peak_bytes, candidate.sim.peak_bytes);
  }
  plan.minimum_budget_bytes = budget_for_peak(plan.minimum_peak_bytes);
  if (current) {
    REMAT_CHECK(static_cast<int64_t>(current->size()) == graph.size(), "plan: the current plan has {} tags for a "
                "graph of {} nodes", current->size(), graph.size());
    extra.push_back({*current, c.simulate(*current), "the plan applied so far"});
  }
  if (options.budget) {
    int64_t reachable = plan.minimum_peak_bytes;
    if (current) reachable = std::min(reachable, extra.back().sim.peak_bytes);
    if (planning_target(*options.budget) < reachable) fail_budget(options.policy, *options.budget, reachable);
  }
  if (options.policy == "cost") plan.tags = cost_tags(c, options.budget, extra, detail);
  if (options.policy == "optimal") plan.tags = optimal_tags(c, options.budget, extra, detail);
  for (int64_t v = 0; v < graph.size(); ++v) plan.reasons.push_back(reason(c, options.policy, plan.tags, v, detail));
  plan = finish_plan(graph, std::move(plan));
  plan.planning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

int64_t minimum_peak(const GraphProfile& graph, const Overrides& overrides) {
  check_overrides(graph, overrides);
  const Context c(graph, overrides);
  int64_t minimum = std::numeric_limits<int64_t>::max();
  for (const Candidate& candidate : least_memory_plans(c, overrides)) {
    minimum = std::min(minimum, candidate.sim.peak_bytes);
  }
  return minimum;
}

int64_t budget_for(int64_t peak) { return budget_for_peak(peak); }

int64_t minimum_budget(const GraphProfile& graph, const Overrides& overrides) {
  return budget_for_peak(minimum_peak(graph, overrides));
}

}  // namespace remat::scheduler

