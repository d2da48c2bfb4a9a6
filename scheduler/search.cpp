// The planners' shared pieces; see search.h.
#include "scheduler/search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace remat::scheduler::search {

std::vector<std::vector<int64_t>> consumers_of(const GraphProfile& graph) {
  std::vector<std::vector<int64_t>> consumers(graph.size());
  for (const NodeProfile& node : graph.nodes) {
    for (int64_t input : node.inputs) {
      if (input >= 0) consumers[input].push_back(node.position);
    }
  }
  return consumers;
}

void settle_unread(const Context& c, std::vector<Tag>& tags) {
  settle_unread(c, tags, [](int64_t) { return true; });
}

bool better(const Simulation& a, const Simulation& b) {
  return a.peak_bytes < b.peak_bytes ||
         (a.peak_bytes == b.peak_bytes && a.saved_bytes_after_forward < b.saved_bytes_after_forward);
}

std::vector<Tag> all(const Context& c, Tag tag) {
  std::vector<Tag> tags(c.graph.size(), Tag::Keep);
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if (c.decidable(v)) tags[v] = tag;
  }
  return c.with_forced(tags);
}

// Positions p that cut the graph: no edge jumps from before p to after it,
// so p's output is the only value crossing (a chain's joints).
std::vector<int64_t> cuts(const Context& c) {
  std::vector<int64_t> last_use(c.graph.size(), -1);
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    for (int64_t u : c.consumers[v]) last_use[v] = std::max(last_use[v], u);
  }
  std::vector<int64_t> result;
  int64_t reach = -1;  // the furthest consumer of any node before p
  for (int64_t p = 0; p + 1 < c.graph.size(); ++p) {
    if (reach <= p && c.graph.nodes[p].view_of < 0 && c.consumers[p].size() > 0) result.push_back(p);
    reach = std::max(reach, last_use[p]);
  }
  return result;
}

// The simulator matches the allocator to the byte on every graph tested,
// but user code can hold memory the profile does not see (engine/record.h,
// Note [Inputs from outside the graph]): plans aim at the budget less this
// share of it and a few bytes.
constexpr double kBudgetMargin = 0.01;
constexpr int64_t kBudgetMarginBytes = 64;

int64_t planning_target(int64_t budget) {
  return budget - static_cast<int64_t>(std::ceil(kBudgetMargin * static_cast<double>(budget))) - kBudgetMarginBytes;
}

// The smallest budget whose planning target reaches `peak`.
int64_t budget_for_peak(int64_t peak) {
  int64_t budget = static_cast<int64_t>(static_cast<double>(peak + kBudgetMarginBytes) / (1.0 - kBudgetMargin)) - 2;
  while (planning_target(budget) < peak) ++budget;
  return budget;
}

[[noreturn]] void fail_budget(const std::string& policy, int64_t budget, int64_t minimum) {
  const int64_t needed = budget_for_peak(minimum);
  REMAT_FAIL("plan: policy {} cannot fit a budget of {} bytes ({:.2f} MiB): the smallest peak it reaches on this "
             "graph is {} bytes ({:.2f} MiB), so the budget must be at least {} bytes ({:.2f} MiB, with a {:.0f}% "
             "margin for the simulator)", policy, budget, budget / kMiB, minimum, minimum / kMiB, needed, needed / kMiB,
             100 * kBudgetMargin);
}

const Candidate& least_memory(const std::vector<Candidate>& pool) {
  return *std::min_element(pool.begin(), pool.end(),
                           [](const Candidate& a, const Candidate& b) { return better(a.sim, b.sim); });
}

// The fastest plan in `pool` whose peak fits `target`, if any.
const Candidate* fastest_fitting(const std::vector<Candidate>& pool, int64_t target) {
  const Candidate* best = nullptr;
  for (const Candidate& candidate : pool) {
    if (candidate.sim.peak_bytes > target) continue;
    if (!best || candidate.sim.recompute_ms < best->sim.recompute_ms ||
        (candidate.sim.recompute_ms == best->sim.recompute_ms && candidate.sim.peak_bytes < best->sim.peak_bytes)) {
      best = &candidate;
    }
  }
  return best;
}

// The nominal clocks (Note [Budgets from bytes alone]): fixed prices that
// only order the search. A roofline (GEMMs dear per byte, elementwise ops
// cheap, about as this project's CPU kernels measure) and a flat price per
// replay (the fewest replays per byte freed); each search reaches points
// the other misses (W2: 44.2 and 50.4 MB before improve_peak, 42.1 after
// it for both).
struct NominalClock {
  double flops_per_ms = 0, bytes_per_ms = 0, ms_per_node = 0;
  double ms(int64_t flops, int64_t bytes) const {
    return ms_per_node + (flops_per_ms > 0 ? static_cast<double>(flops) / flops_per_ms : 0.0) +
           (bytes_per_ms > 0 ? static_cast<double>(bytes) / bytes_per_ms : 0.0);
  }
};
constexpr NominalClock kNominalClocks[] = {{.flops_per_ms = 5e7, .bytes_per_ms = 5e5}, {.ms_per_node = 1}};

GraphProfile nominal_times(const GraphProfile& graph, const NominalClock& clock) {
  GraphProfile nominal = graph;
  for (NodeProfile& node : nominal.nodes) {
    int64_t moved = node.dense_output_bytes();
    for (size_t i = 0; i < node.input_shapes.size(); ++i) {
      moved += numel(node.input_shapes[i]) * dtype_size(node.input_dtypes[i]);
    }
    node.forward_ms = clock.ms(node.flops, moved);
    node.replay_ms = clock.ms(node.replay_flops, moved);
    node.replay_in_place_ms = 0;
    node.backward_ms = clock.ms(2 * node.flops, 2 * moved);
  }
  nominal.step_ms = 0;
  return nominal;
}

GraphProfile roofline_times(const GraphProfile& graph) { return nominal_times(graph, kNominalClocks[0]); }

double roofline_ms(int64_t flops, int64_t bytes) { return kNominalClocks[0].ms(flops, bytes); }

std::vector<GraphProfile> nominal_profiles(const GraphProfile& graph) {
  std::vector<GraphProfile> profiles;
  for (const NominalClock& clock : kNominalClocks) profiles.push_back(nominal_times(graph, clock));
  return profiles;
}

}  // namespace remat::scheduler::search
