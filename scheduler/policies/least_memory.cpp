// The graph's least-memory plans (policy.h, Note [Budgets from bytes
// alone]): the policies' own searches run on nominal times, their lowest
// plan improved flip by flip. Their lowest peak is the graph's minimum
// feasible budget, the same on every run and machine. The search is
// remembered for the graph last searched (Note [Least-memory plans
// remembered]).
#include <algorithm>
#include <atomic>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>

#include "scheduler/policies/policy.h"
#include "scheduler/profile_json.h"

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

// The search itself: the plans on each nominal clock, simulated on it.
std::vector<Candidate> search_least_memory(const std::vector<GraphProfile>& nominal, const Overrides& overrides) {
  std::vector<Candidate> plans;
  for (const GraphProfile& profile : nominal) {
    const Context n(profile, overrides);
    std::vector<Candidate> pool = pooled_plans(n);
    pool.push_back(improve_peak(n, search::least_memory(pool)));
    plans.insert(plans.end(), std::make_move_iterator(pool.begin()), std::make_move_iterator(pool.end()));
  }
  for (Candidate& plan : plans) plan.origin = "least memory (nominal times): " + plan.origin;
  return plans;
}

// Note [Least-memory plans remembered]
// The search takes seconds on a large graph (an 8B Llama's, 741 nodes:
// about 1.7 s on a 2-core Zen 4), and make_plan runs it for every plan:
// a budget given as a share of keep-all's peak plans keep-all first, a
// Checkpointer plans a graph again after each warm step, a sweep plans
// every policy on the same graph. What it finds depends on the graph's
// bytes and the user's rules alone (Note [Budgets from bytes alone]), so
// the last graph's plans are remembered, keyed by its nominal profile in
// full (profile_to_json: every field the planners and the simulator read)
// and the overrides, and each caller gets them repriced at its own times,
// as the search itself reprices them. Three fields differ from step to step
// of one graph and are set alike in the key: sequence_nr and tag (no
// planner reads them) and the region ids (read only for equality: numbered
// by first appearance). A remembered answer is the search's: the key holds
// everything the search reads. One graph is remembered, not more: its
// plans hold tens of MiB on a large graph.
struct Remembered {
  std::string key;
  Overrides overrides;
  std::vector<Candidate> plans;  // simulated on nominal times
};

struct Memory {
  std::mutex mutex;
  std::optional<Remembered> last;
  std::atomic<int64_t> searches{0};
};

Memory& memory() {
  static Memory m;
  return m;
}

std::string key_of(GraphProfile graph) {
  std::map<uint64_t, uint64_t> regions;  // id -> order of first appearance
  for (NodeProfile& node : graph.nodes) {
    node.sequence_nr = 0;
    node.tag = Tag::Keep;
    if (node.region != 0) node.region = regions.emplace(node.region, regions.size() + 1).first->second;
  }
  return profile_to_json(graph);
}

}  // namespace

std::vector<Candidate> least_memory_plans(const Context& c, const Overrides& overrides) {
  const std::vector<GraphProfile> nominal = search::nominal_profiles(c.graph);
  std::string key = key_of(nominal.front());
  Memory& m = memory();
  std::optional<std::vector<Candidate>> plans;
  {
    const std::lock_guard lock(m.mutex);
    if (m.last && m.last->key == key && m.last->overrides == overrides) plans = m.last->plans;
  }
  if (!plans) {
    plans = search_least_memory(nominal, overrides);
    ++m.searches;
    const std::lock_guard lock(m.mutex);
    m.last = Remembered{std::move(key), overrides, *plans};
  }
  for (Candidate& plan : *plans) reprice(c.graph, plan.sim);  // the same peak; the replays priced at measured times
  return std::move(*plans);
}

int64_t least_memory_searches() { return memory().searches.load(); }

void forget_least_memory_plans() {
  Memory& m = memory();
  const std::lock_guard lock(m.mutex);
  m.last.reset();
}

}  // namespace remat::scheduler::policies
