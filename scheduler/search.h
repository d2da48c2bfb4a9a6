// What the planners of plan.cpp and optimal.cpp share (internal to
// scheduler/): the planning context, plans tried with their simulations,
// the rule-based plans, the greedy path of `cost`, and budget arithmetic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/plan.h"

namespace remat::scheduler::search {

constexpr double kMiB = 1024.0 * 1024.0;

std::vector<std::vector<int64_t>> consumers_of(const GraphProfile& graph);

// Everything a planner works with.
struct Context {
  const GraphProfile& graph;
  std::vector<std::optional<Tag>> forced;
  std::vector<bool> read;
  std::vector<std::vector<int64_t>> consumers;

  Context(const GraphProfile& g, const Overrides& overrides)
      : graph(g), forced(forced_tags(g, overrides)), read(read_by_backward(g)), consumers(consumers_of(g)) {}

  int64_t root() const { return graph.size() - 1; }
  // Worth deciding: owns bytes that backward reads, and no rule binds it.
  bool decidable(int64_t v) const {
    const NodeProfile& node = graph.nodes[v];
    return v != root() && !forced[v] && read[v] && node.view_of < 0 && node.output_bytes > 0;
  }
  std::vector<Tag> with_forced(std::vector<Tag> tags) const {
    for (size_t v = 0; v < tags.size(); ++v) {
      if (forced[v]) tags[v] = *forced[v];
    }
    return tags;
  }
  Simulation simulate(const std::vector<Tag>& tags) const { return scheduler::simulate(graph, tags); }
};

// A whole-graph plan tried, its simulation, and where it came from.
struct Candidate {
  std::vector<Tag> tags;
  Simulation sim;
  std::string origin;
};

// A node no backward reads, feeding a dropped node, would be held by that
// node's replay inputs until backward: drop it too (keep it where `may_drop`
// says no), so that replays reach back to values kept anyway; a node that
// feeds no replay is kept (it is freed after forward either way).
void settle_unread(const Context& c, std::vector<Tag>& tags);
template <class MayDrop>
void settle_unread(const Context& c, std::vector<Tag>& tags, MayDrop may_drop) {
  for (int64_t v = c.graph.size(); v-- > 0;) {
    if (c.forced[v] || v == c.root() || c.read[v]) continue;
    bool feeds_replay = false;
    for (int64_t u : c.consumers[v]) feeds_replay = feeds_replay || tags[u] == Tag::Recompute;
    tags[v] = feeds_replay && may_drop(v) ? Tag::Recompute : Tag::Keep;
  }
}

// a has the lower peak, or the same peak and fewer bytes after forward.
bool better(const Simulation& a, const Simulation& b);
// `tag` on every node worth deciding (Context::free), Keep elsewhere.
std::vector<Tag> all(const Context& c, Tag tag);
std::vector<Tag> blocks_tags(const Context& c);
std::vector<Tag> sqrt_tags(const Context& c);
// The cost rule on positions first..last (see search.cpp).
void cost_rule(const Context& c, std::vector<Tag>& tags, int64_t first, int64_t last);
// Positions p that cut the graph: no edge jumps from before p to after it.
std::vector<int64_t> cuts(const Context& c);
std::vector<Candidate> greedy_path(const Context& c);
// The greedy path given, a static descent and the rule-based plans.
std::vector<Candidate> descent(const Context& c, std::vector<Candidate> greedy);
// The fastest plan in `pool` whose peak is at most `target`, or null.
const Candidate* fastest_fitting(const std::vector<Candidate>& pool, int64_t target);

// Note [Budgets from bytes alone]
// Whether a budget can be met must not follow the clock: measured times
// move from run to run, and a minimum found by searches that order their
// candidates by them moved with them (up to 1.32x on small GPTs, so that a
// budget met by one step was refused at the next re-plan). The least-memory
// plans are therefore searched on a copy of the profile whose times are
// nominal: a fixed roofline of each node's FLOPs and bytes, the same on
// every run and machine, and the lowest of them is improved by flipping
// single tags while the peak falls. The smallest simulated peak among them
// is the graph's minimum (peaks depend on bytes alone); these plans join
// the measured-time pool, where the real times choose among those that fit.
// `overrides`: c's. The plans come simulated on c.graph (real times).
std::vector<Candidate> least_memory_plans(const Context& c, const Overrides& overrides);

// `graph` with the roofline clock's nominal times in place of measured
// ones (Note [Budgets from bytes alone]): how a rehearsed step, which
// measured no time, is planned (Checkpointer::rehearse).
GraphProfile roofline_times(const GraphProfile& graph);

// What a budget leaves to plan with, and the smallest budget for a peak.
int64_t planning_target(int64_t budget);
int64_t budget_for_peak(int64_t peak);
[[noreturn]] void fail_budget(const std::string& policy, int64_t budget, int64_t minimum);

// Plans of the chain model's front in (peak, recompute time), simulated
// (optimal.cpp; see chain_front).
std::vector<Candidate> chain_front_plans(const Context& c, const std::vector<Candidate>& greedy);

// The `optimal` policy (optimal.cpp).
// `extra`: plans that compete besides its own (the least-memory plans, the
// plan a re-plan replaces); with a budget one of them fits (make_plan checks).
std::vector<Tag> optimal_tags(const Context& c, std::optional<int64_t> budget, const std::vector<Candidate>& extra,
                              std::string& why);

}  // namespace remat::scheduler::search
