// The graph's least-memory plans (policy.h, Note [Budgets from bytes
// alone]): the policies' own searches run on nominal times, their lowest
// plan improved flip by flip. Their lowest peak is the graph's minimum
// feasible budget, the same on every run and machine.
#include <algorithm>
#include <iterator>

#include "scheduler/policies/policy.h"

namespace remat::scheduler::policies {
namespace {

using search::Candidate;
using search::Context;

// From `start`, flip one decidable node at a time (in position order, the
// unread values settled) while that lowers the peak (or, at the same peak,
// the bytes after forward), until no flip does: a local minimum of the
// peak in which times play no part.
Candidate improve_peak(const Context& c, Candidate start) {
  for (bool improved = true; improved;) {
    improved = false;
    for (int64_t v = 0; v < c.graph.size(); ++v) {
      if (!c.decidable(v)) continue;
      std::vector<Tag> trial = start.tags;
      trial[v] = trial[v] == Tag::Keep ? Tag::Recompute : Tag::Keep;
      search::settle_unread(c, trial);
      Simulation sim = c.simulate(trial);
      if (!search::better(sim, start.sim)) continue;
      start.tags = std::move(trial);
      start.sim = std::move(sim);
      improved = true;
    }
  }
  start.origin += ", improved flip by flip";
  return start;
}

}  // namespace

std::vector<Candidate> least_memory_plans(const Context& c, const Overrides& overrides) {
  std::vector<Candidate> plans;
  for (const GraphProfile& nominal : search::nominal_profiles(c.graph)) {
    const Context n(nominal, overrides);
    std::vector<Candidate> pool = pooled_plans(n);
    pool.push_back(improve_peak(n, search::least_memory(pool)));
    plans.insert(plans.end(), std::make_move_iterator(pool.begin()), std::make_move_iterator(pool.end()));
  }
  for (Candidate& plan : plans) {
    reprice(c.graph, plan.sim);  // the same peak; the replays priced at measured times
    plan.origin = "least memory (nominal times): " + plan.origin;
  }
  return plans;
}

}  // namespace remat::scheduler::policies
