// Policy `cost`: the cost rule alone. Keep what is expensive to recompute
// per byte (GEMMs), drop what is cheap (elementwise ops, norms,
// activations): from keep-all, drop one value at a time, the one that buys
// the most bytes per millisecond of replay. Without a budget it goes as far
// as replays within 5% of the step allow; with one, it takes the fastest
// plan along its descent that fits.
#include <algorithm>
#include <limits>
#include <queue>

#include <fmt/format.h>

#include "scheduler/policies/policy.h"

namespace remat::scheduler::policies {
namespace {

using search::Candidate;
using search::Context;

// The rule in its simplest form: from keep-all,
// drop memory-bound outputs (cheapest to rebuild per byte first) whenever
// the simulator finds that it lowers the peak (or, at an equal peak, the
// bytes held after forward); never replay a GEMM. Dropping softmax, say,
// while the scores that feed it must then be held instead, saves nothing
// and is not done.
void cost_rule(const Context& c, std::vector<Tag>& tags) {
  auto not_gemm = [&](int64_t v) { return !c.graph.nodes[v].compute_bound; };
  std::vector<int64_t> order;
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if (c.decidable(v) && not_gemm(v)) order.push_back(v);
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return c.graph.nodes[a].ms_per_mib() < c.graph.nodes[b].ms_per_mib();
  });
  Simulation current = c.simulate(tags);
  for (int64_t v : order) {
    std::vector<Tag> trial = tags;
    trial[v] = Tag::Recompute;
    search::settle_unread(c, trial, not_gemm);
    Simulation sim = c.simulate(trial);
    if (!search::better(sim, current)) continue;
    tags = std::move(trial);
    current = std::move(sim);
  }
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
  std::vector<Tag> tags = search::all(c, Tag::Keep);
  Simulation current = c.simulate(tags);
  std::vector<Candidate> path{{tags, current, "cost: keep all"}};
  auto trial_of = [&](int64_t v) {
    std::vector<Tag> trial = tags;
    trial[v] = Tag::Recompute;
    search::settle_unread(c, trial);
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
    path.push_back({tags, current, fmt::format("cost: greedy, {:.3g} bytes per ms of replay", now)});
    ++round;
  }
  return path;
}

}  // namespace

// The greedy path, then a static descent (cheapest forward ms per MiB
// first) that reaches further down where the greedy path stops (no single
// drop lowering the peak), and the rule in its simplest form.
std::vector<Candidate> cost_plans(const Context& c) {
  std::vector<Candidate> pool = greedy_path(c);
  std::vector<int64_t> order;
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if (c.decidable(v)) order.push_back(v);
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return c.graph.nodes[a].ms_per_mib() < c.graph.nodes[b].ms_per_mib();
  });
  std::vector<Tag> tags = search::all(c, Tag::Keep);
  for (int64_t v : order) {
    tags[v] = Tag::Recompute;
    search::settle_unread(c, tags);
    pool.push_back({tags, c.simulate(tags),
                    fmt::format("cost: dropped up to {:.3f} ms/MiB", c.graph.nodes[v].ms_per_mib())});
  }
  std::vector<Tag> rule = search::all(c, Tag::Keep);
  cost_rule(c, rule);
  pool.push_back({rule, c.simulate(rule), "cost: memory-bound values only"});
  return pool;
}

Answer plan_cost(const Request& request) {
  if (!request.budget) return within_replay_allowance(request.c, cost_plans(request.c), "cost");
  const std::vector<Candidate> pool = with_current(request, cost_plans(request.c));
  const Candidate* best = search::fastest_fitting(pool, request.target);
  if (!best) return fall_back(request, "cost");
  return {.tags = best->tags, .detail = best->origin, .chosen_by = "cost"};
}

}  // namespace remat::scheduler::policies
