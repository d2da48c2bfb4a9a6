// The planners' shared pieces; see search.h.
#include "scheduler/search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

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

std::vector<Tag> blocks_tags(const Context& c) {
  std::vector<Tag> tags(c.graph.size(), Tag::Keep);
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    const std::string& block = c.graph.nodes[v].block;
    if (block.empty() || v == c.root()) continue;
    const bool read_outside = std::any_of(c.consumers[v].begin(), c.consumers[v].end(),
                                          [&](int64_t u) { return c.graph.nodes[u].block != block; });
    tags[v] = read_outside ? Tag::Keep : Tag::Recompute;
  }
  tags = c.with_forced(tags);
  settle_unread(c, tags);
  return tags;
}

// In stage `first..last`, the cost rule: from keep-all, drop memory-bound
// outputs (cheapest to rebuild per byte first) whenever the simulator finds
// that it lowers the peak (or, at an equal peak, the bytes held after
// forward); never replay a GEMM. Dropping softmax, say, while the scores
// that feed it must then be held instead, saves nothing and is not done.
void cost_rule(const Context& c, std::vector<Tag>& tags, int64_t first, int64_t last) {
  auto not_gemm = [&](int64_t v) { return !c.graph.nodes[v].compute_bound; };
  std::vector<int64_t> order;
  for (int64_t v = first; v <= last; ++v) {
    if (c.decidable(v) && not_gemm(v)) order.push_back(v);
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return c.graph.nodes[a].ms_per_mib() < c.graph.nodes[b].ms_per_mib();
  });
  Simulation current = c.simulate(tags);
  for (int64_t v : order) {
    std::vector<Tag> trial = tags;
    trial[v] = Tag::Recompute;
    settle_unread(c, trial, not_gemm);
    Simulation sim = c.simulate(trial);
    if (!better(sim, current)) continue;
    tags = std::move(trial);
    current = std::move(sim);
  }
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

// Chen et al. 2016: walk the graph adding up the bytes backward reads, and
// keep a cut each time total / sqrt(#cuts) bytes have gone by since the last
// (about sqrt(#cuts) segments).
std::vector<Tag> sqrt_tags(const Context& c) {
  int64_t total = 0;
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if (c.read[v]) total += c.graph.nodes[v].output_bytes;
  }
  const std::vector<int64_t> joints = cuts(c);
  const double segments = std::max(1.0, std::sqrt(static_cast<double>(joints.size())));
  const double segment_bytes = static_cast<double>(total) / segments;
  std::vector<Tag> tags = all(c, Tag::Recompute);
  double since = 0;
  size_t j = 0;
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if (c.read[v]) since += static_cast<double>(c.graph.nodes[v].output_bytes);
    if (j < joints.size() && joints[j] == v) {
      ++j;
      if (since >= segment_bytes) {
        if (c.decidable(v)) tags[v] = Tag::Keep;
        since = 0;
      }
    }
  }
  settle_unread(c, tags);
  return tags;
}

// What dropping one more value buys: bytes off the peak (and, at a quarter
// weight, off what forward leaves alive) per millisecond of replay it adds.
double gain(const Simulation& from, const Simulation& to) {
  const double bytes = static_cast<double>(from.peak_bytes - to.peak_bytes) +
                       0.25 * static_cast<double>(from.saved_bytes_after_forward - to.saved_bytes_after_forward);
  return bytes / std::max(1e-3, to.recompute_ms - from.recompute_ms);
}

// From keep-all, drop one value at a time, the one that buys the most bytes
// per millisecond of replay (a value no backward reads goes with the first
// dropped value that replays from it), until no drop lowers memory. Gains
// mostly shrink as values go, so stale gains are re-evaluated lazily (a
// heuristic: peaks are not submodular, and the simulator judges each step).
std::vector<Candidate> greedy_path(const Context& c) {
  std::vector<Tag> tags = all(c, Tag::Keep);
  Simulation current = c.simulate(tags);
  std::vector<Candidate> path{{tags, current, "keep all"}};
  auto trial_of = [&](int64_t v) {
    std::vector<Tag> trial = tags;
    trial[v] = Tag::Recompute;
    settle_unread(c, trial);
    return trial;
  };
  struct Entry {
    double gain;
    int64_t node, round;
    // Ties go to the earlier node, so that equal gains (nominal times on a
    // repeated layer) order the same way on every run.
    bool operator<(const Entry& other) const {
      return gain < other.gain || (gain == other.gain && node > other.node);
    }
  };
  std::priority_queue<Entry> queue;
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if (c.decidable(v)) queue.push({std::numeric_limits<double>::infinity(), v, -1});
  }
  int64_t round = 0;
  while (!queue.empty()) {
    const Entry top = queue.top();
    queue.pop();
    std::vector<Tag> trial = trial_of(top.node);
    Simulation sim = c.simulate(trial);
    const double now = gain(current, sim);
    if (top.round != round) {  // stale: put back at its current worth
      queue.push({now, top.node, round});
      continue;
    }
    if (now <= 0) break;
    tags = std::move(trial);
    current = std::move(sim);
    path.push_back({tags, current, fmt::format("greedy, {:.3g} bytes per ms of replay", now)});
    ++round;
  }
  return path;
}

// The plans `cost` with a budget chooses among: the greedy path, a static
// descent (cheapest forward ms per MiB first) that reaches further down, and
// the rule-based plans.
std::vector<Candidate> descent(const Context& c, std::vector<Candidate> greedy) {
  std::vector<Candidate> pool = std::move(greedy);
  std::vector<int64_t> order;
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if (c.decidable(v)) order.push_back(v);
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return c.graph.nodes[a].ms_per_mib() < c.graph.nodes[b].ms_per_mib();
  });
  std::vector<Tag> tags = all(c, Tag::Keep);
  for (int64_t v : order) {
    tags[v] = Tag::Recompute;
    settle_unread(c, tags);
    pool.push_back({tags, c.simulate(tags), fmt::format("dropped up to {:.3f} ms/MiB", c.graph.nodes[v].ms_per_mib())});
  }
  for (auto [name, rule] : {std::pair{"blocks", &blocks_tags}, std::pair{"sqrt", &sqrt_tags}}) {
    std::vector<Tag> t = rule(c);
    pool.push_back({t, c.simulate(t), name});
  }
  std::vector<Tag> rule = all(c, Tag::Keep);
  cost_rule(c, rule, 0, c.root());
  pool.push_back({rule, c.simulate(rule), "cost rule"});
  return pool;
}

// The simulator matches the allocator to the byte on every graph tested,
// but user code can hold memory the profile does not see (engine/autograd.h,
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
      settle_unread(c, trial);
      Simulation sim = c.simulate(trial);
      if (!better(sim, start.sim)) continue;
      start.tags = std::move(trial);
      start.sim = std::move(sim);
      improved = true;
    }
  }
  start.origin += ", improved flip by flip";
  return start;
}

std::vector<Candidate> least_memory_plans(const Context& c, const Overrides& overrides) {
  std::vector<Candidate> plans;
  for (const NominalClock& clock : kNominalClocks) {
    const GraphProfile nominal = nominal_times(c.graph, clock);
    const Context n(nominal, overrides);
    const std::vector<Candidate> greedy = greedy_path(n);
    std::vector<Candidate> pool = descent(n, greedy);
    std::vector<Candidate> front = chain_front_plans(n, greedy);
    pool.insert(pool.end(), std::make_move_iterator(front.begin()), std::make_move_iterator(front.end()));
    const auto lowest = std::min_element(pool.begin(), pool.end(),
                                         [](const Candidate& a, const Candidate& b) { return better(a.sim, b.sim); });
    pool.push_back(improve_peak(n, *lowest));
    plans.insert(plans.end(), std::make_move_iterator(pool.begin()), std::make_move_iterator(pool.end()));
  }
  for (Candidate& plan : plans) {
    reprice(c.graph, plan.sim);  // the same peak; the replays priced at measured times
    plan.origin = "least memory (nominal times): " + plan.origin;
  }
  return plans;
}

}  // namespace remat::scheduler::search
