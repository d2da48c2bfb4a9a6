// What the planners share (internal to scheduler/: plan.cpp and the
// policies of policies/): the planning context, plans tried with their
// simulations, the graph's cuts, nominal clocks and budget arithmetic.
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
  std::vector<std::optional<Tag>> preferred;  // by prefer rules (applied by make_plan)
  std::vector<bool> read;
  std::vector<std::vector<int64_t>> consumers;

  Context(const GraphProfile& g, const Overrides& overrides)
      : graph(g),
        forced(forced_tags(g, overrides)),
        preferred(preferred_tags(g, overrides)),
        read(read_by_backward(g)),
        consumers(consumers_of(g)) {}

  int64_t root() const { return graph.size() - 1; }
  // Worth deciding: owns bytes that backward reads, and no rule binds it.
  bool decidable(int64_t v) const {
    const NodeProfile& node = graph.nodes[v];
    return v != root() && !forced[v] && read[v] && node.view_of < 0 && node.output_bytes > 0;
  }
  // A node whose tag changes what the step holds: it owns bytes and no rule
  // binds it, whether a backward reads it or only a dropped consumer's
  // replay does (milp's space: every plan the engine can run).
  bool taggable(int64_t v) const {
    const NodeProfile& node = graph.nodes[v];
    return v != root() && !forced[v] && node.view_of < 0 && node.output_bytes > 0;
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
// `tag` on every node worth deciding (Context::decidable), Keep elsewhere.
std::vector<Tag> all(const Context& c, Tag tag);
// Positions p that cut the graph: no edge jumps from before p to after it.
std::vector<int64_t> cuts(const Context& c);
// The fastest plan in `pool` whose peak is at most `target`, or null.
const Candidate* fastest_fitting(const std::vector<Candidate>& pool, int64_t target);
// The plan of least memory (better) in `pool`; pool is not empty.
const Candidate& least_memory(const std::vector<Candidate>& pool);

// `graph` under the nominal clocks of Note [Budgets from bytes alone]
// (policies/policy.h): fixed prices of each node's FLOPs and bytes,
// the same on every run and machine, that only order a search.
std::vector<GraphProfile> nominal_profiles(const GraphProfile& graph);
// `graph` with the roofline clock's nominal times in place of measured
// ones: how a rehearsed step, which measured no time, is planned
// (Checkpointer::rehearse).
GraphProfile roofline_times(const GraphProfile& graph);
// The roofline clock's price of an op of `flops` that moves `bytes` (its
// inputs and output), in nominal ms (dtr's costs of unmeasured nodes).
double roofline_ms(int64_t flops, int64_t bytes);

// What a budget leaves to plan with, and the smallest budget for a peak.
int64_t planning_target(int64_t budget);
int64_t budget_for_peak(int64_t peak);
[[noreturn]] void fail_budget(const std::string& policy, int64_t budget, int64_t minimum);

}  // namespace remat::scheduler::search
