// The planners; see plan.h.
#include "scheduler/plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <queue>

#include <fmt/format.h>

#include "scheduler/optimal.h"

namespace remat::scheduler {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// `cost` without a budget spends at most this share of a step on replays.
constexpr double kNoBudgetReplayShare = 0.05;

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::vector<std::vector<int64_t>> consumers_of(const GraphProfile& graph) {
  std::vector<std::vector<int64_t>> consumers(graph.size());
  for (const NodeProfile& node : graph.nodes) {
    for (int64_t input : node.inputs) {
      if (input >= 0) consumers[input].push_back(node.position);
    }
  }
  return consumers;
}

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
  bool free(int64_t v) const {
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

// A node no backward reads, feeding a dropped node, would be held by that
// node's replay inputs until backward: drop it too where `may_drop` allows,
// so that replays reach back to values kept anyway; a node that feeds no
// replay is kept (it is freed after forward either way).
template <class MayDrop>
void settle_unread(const Context& c, std::vector<Tag>& tags, MayDrop may_drop) {
  for (int64_t v = c.graph.size(); v-- > 0;) {
    if (c.forced[v] || v == c.root() || c.read[v]) continue;
    const bool feeds_replay = std::any_of(c.consumers[v].begin(), c.consumers[v].end(),
                                          [&](int64_t u) { return tags[u] == Tag::Recompute; });
    tags[v] = feeds_replay && may_drop(v) ? Tag::Recompute : Tag::Keep;
  }
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
    if (c.free(v)) tags[v] = tag;
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
  auto not_gemm = [&](int64_t v) { return !is_compute_bound(c.graph.nodes[v].op); };
  std::vector<int64_t> order;
  for (int64_t v = first; v <= last; ++v) {
    if (c.free(v) && not_gemm(v)) order.push_back(v);
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
// keep a cut each time about sqrt(total) bytes have gone by since the last.
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
        if (c.free(v)) tags[v] = Tag::Keep;
        since = 0;
      }
    }
  }
  settle_unread(c, tags);
  return tags;
}

struct Candidate {
  std::vector<Tag> tags;
  Simulation sim;
  std::string origin;
};

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
// only shrink as values go, so stale gains are re-evaluated lazily.
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
    bool operator<(const Entry& other) const { return gain < other.gain; }
  };
  std::priority_queue<Entry> queue;
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if (c.free(v)) queue.push({std::numeric_limits<double>::infinity(), v, -1});
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
std::vector<Candidate> descent(const Context& c) {
  std::vector<Candidate> pool = greedy_path(c);
  std::vector<int64_t> order;
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if (c.free(v)) order.push_back(v);
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

// The simulator and the allocator agree to a fraction of a percent, not to
// the byte: plans aim at the budget less this share of it, and less a few
// bytes for the scalar operands (add(x, 1.0)) the profile does not see.
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

std::vector<Tag> cost_tags(const Context& c, std::optional<int64_t> budget, std::string& why) {
  if (!budget) {
    // No budget: the lowest memory among the plans tried whose replays cost
    // at most kNoBudgetReplayShare of the measured step; the greedy order
    // drops memory-bound values first (most bytes per ms), GEMMs only if cheap.
    const double allowance = kNoBudgetReplayShare * (c.graph.total_forward_ms() + c.graph.total_backward_ms());
    const std::vector<Candidate> pool = descent(c);
    const Candidate* chosen = &pool.front();  // keep-all
    for (const Candidate& candidate : pool) {
      if (candidate.sim.recompute_ms <= allowance && better(candidate.sim, chosen->sim)) chosen = &candidate;
    }
    why = fmt::format("replays within {:.0f}% of the step ({:.1f} of {:.1f} ms allowed)", 100 * kNoBudgetReplayShare,
                      chosen->sim.recompute_ms, allowance);
    return chosen->tags;
  }
  const std::vector<Candidate> pool = descent(c);
  const Candidate* best = nullptr;
  int64_t minimum = std::numeric_limits<int64_t>::max();
  for (const Candidate& candidate : pool) {
    minimum = std::min(minimum, candidate.sim.peak_bytes);
    if (candidate.sim.peak_bytes > planning_target(*budget)) continue;
    if (!best || candidate.sim.recompute_ms < best->sim.recompute_ms ||
        (candidate.sim.recompute_ms == best->sim.recompute_ms && candidate.sim.peak_bytes < best->sim.peak_bytes)) {
      best = &candidate;
    }
  }
  if (!best) fail_budget("cost", *budget, minimum);
  why = best->origin;
  return best->tags;
}

// The chain of stages between cuts. A stage's modes are the whole-graph
// plans offered (keep all, replay each stage from its input, the cost rule
// per stage, and points along the greedy path), each restricted to the
// stage; a mode's costs are read from one simulation of its plan.
struct Chain {
  std::vector<std::pair<int64_t, int64_t>> stages;  // first, last position
  std::vector<std::vector<Tag>> mode_plans;
  ChainModel model;
};

std::vector<Tag> combine(const Context& c, const Chain& chain, const std::vector<int>& modes) {
  std::vector<Tag> tags(c.graph.size(), Tag::Keep);
  for (size_t s = 0; s < chain.stages.size(); ++s) {
    for (int64_t v = chain.stages[s].first; v <= chain.stages[s].second; ++v) tags[v] = chain.mode_plans[modes[s]][v];
  }
  return c.with_forced(tags);
}

std::vector<Tag> replay_stages(const Context& c, const std::vector<std::pair<int64_t, int64_t>>& stages) {
  std::vector<Tag> tags = all(c, Tag::Keep);
  for (size_t s = 0; s < stages.size(); ++s) {
    const auto [first, last] = stages[s];
    for (int64_t v = first; v <= last; ++v) {
      // A stage's last node is its output, the next stage's input: kept.
      if (c.free(v) && (v != last || s + 1 == stages.size())) tags[v] = Tag::Recompute;
    }
  }
  settle_unread(c, tags);
  return tags;
}

Chain chain_of(const Context& c, const std::vector<Candidate>& greedy) {
  Chain chain;
  int64_t first = 0;
  for (int64_t cut : cuts(c)) {
    chain.stages.push_back({first, cut});
    first = cut + 1;
  }
  chain.stages.push_back({first, c.root()});
  chain.mode_plans.push_back(all(c, Tag::Keep));
  chain.mode_plans.push_back(replay_stages(c, chain.stages));
  std::vector<Tag> rule = all(c, Tag::Keep);
  for (const auto& [a, b] : chain.stages) cost_rule(c, rule, a, b);
  chain.mode_plans.push_back(rule);
  constexpr size_t kGreedyModes = 6;
  for (size_t k = 1; k <= kGreedyModes && greedy.size() > 1; ++k) {
    chain.mode_plans.push_back(greedy[k * (greedy.size() - 1) / kGreedyModes].tags);
  }
  const size_t n = chain.stages.size();
  chain.model.stages.assign(n, std::vector<StageCost>(chain.mode_plans.size()));
  for (size_t mode = 0; mode < chain.mode_plans.size(); ++mode) {
    const Simulation sim = c.simulate(chain.mode_plans[mode]);
    for (size_t s = 0; s < n; ++s) {
      const auto [a, b] = chain.stages[s];
      const int64_t level = sim.level_before_forward[a];
      const int64_t next = s + 1 < n ? sim.level_before_forward[chain.stages[s + 1].first] : sim.saved_bytes_after_forward;
      StageCost& cost = chain.model.stages[s][mode];
      cost.held = next - level;
      for (int64_t v = a; v <= b; ++v) {
        cost.peak = std::max({cost.peak, sim.forward_peak_at[v] - level, sim.backward_peak_at[v] - level});
        cost.recompute_ms += sim.replay_ms[v];
      }
    }
  }
  return chain;
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

std::vector<Tag> optimal_tags(const Context& c, std::optional<int64_t> budget, std::string& why) {
  const std::vector<Candidate> greedy = greedy_path(c);
  const Chain chain = chain_of(c, greedy);
  const int64_t unbounded = std::numeric_limits<int64_t>::max();
  const int64_t fits = budget ? planning_target(*budget) : unbounded;
  // Besides the chain's plans, the whole-graph plans it was built from
  // compete: the model's stages cannot express every one of them.
  std::vector<Candidate> offered;
  for (const std::vector<Tag>& plan : chain.mode_plans) offered.push_back({plan, c.simulate(plan), "a single mode"});
  offered.insert(offered.end(), greedy.begin(), greedy.end());
  // The model is additive where the engine is nearly so; where the
  // simulator finds the chosen plan over the budget, ask the model again
  // with the excess taken off.
  int64_t target = fits;
  for (int attempt = 0; attempt < 12; ++attempt) {
    const std::optional<std::vector<int>> modes = solve_chain(chain.model, target);
    if (!modes) break;
    std::vector<Tag> tags = combine(c, chain, *modes);
    Simulation sim = c.simulate(tags);
    if (sim.peak_bytes <= fits) {
      offered.push_back({std::move(tags), std::move(sim),
                         fmt::format("stage modes {} over {} stages (0 keep, 1 replay, 2 cost rule, 3+ greedy)",
                                     fmt::join(*modes, ""), chain.stages.size())});
      break;
    }
    target -= std::max<int64_t>(sim.peak_bytes - fits, *budget / 50);
  }
  if (const Candidate* best = fastest_fitting(offered, fits)) {
    why = best->origin;
    return best->tags;
  }
  int64_t minimum = unbounded;
  for (const Candidate& candidate : offered) minimum = std::min(minimum, candidate.sim.peak_bytes);
  fail_budget("optimal", *budget, minimum);
}

std::string reason(const Context& c, const std::string& policy, const std::vector<Tag>& tags, int64_t v,
                   const std::string& detail) {
  const NodeProfile& node = c.graph.nodes[v];
  const bool keep = tags[v] == Tag::Keep;
  if (c.forced[v]) return keep ? "kept by a user rule (must-keep or a checkpoint region's output)"
                               : "replayed by a user rule (must-recompute or inside a checkpoint region)";
  if (node.view_of >= 0) return keep ? "a view: holds no bytes of its own" : "a view of a dropped value: dropped too";
  if (v == c.root()) return "the root: backward starts from it";
  if (!c.read[v]) return "no backward reads it: freed after forward whatever its tag";
  if (policy == "none") return "policy none keeps every output";
  if (policy == "blocks") {
    if (node.block.empty()) return "outside any block: kept";
    return keep ? fmt::format("output of block {}, read after it: kept (a checkpoint)", node.block)
                : fmt::format("inside block {}: replayed in backward", node.block);
  }
  const std::string price = fmt::format("{:.3f} ms/MiB", node.ms_per_mib());
  if (policy == "cost") {
    const char* kind = is_compute_bound(node.op) ? "compute-bound" : "memory-bound";
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

bool is_compute_bound(std::string_view op) { return op == "matmul" || op == "linear" || op == "affine"; }

std::vector<std::string> policy_names() { return {"none", "blocks", "sqrt", "cost", "optimal"}; }

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

Plan make_plan(const GraphProfile& graph, const PlanOptions& options) {
  check_policy(options.policy);
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
  if (options.policy == "cost") plan.tags = cost_tags(c, options.budget, detail);
  if (options.policy == "optimal") plan.tags = optimal_tags(c, options.budget, detail);
  for (int64_t v = 0; v < graph.size(); ++v) plan.reasons.push_back(reason(c, options.policy, plan.tags, v, detail));
  plan = finish_plan(graph, std::move(plan));
  plan.planning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

int64_t minimum_peak(const GraphProfile& graph, const Overrides& overrides) {
  const Context c(graph, overrides);
  int64_t minimum = std::numeric_limits<int64_t>::max();
  for (const Candidate& candidate : descent(c)) minimum = std::min(minimum, candidate.sim.peak_bytes);
  return minimum;
}

int64_t budget_for(int64_t peak) { return budget_for_peak(peak); }

int64_t minimum_budget(const GraphProfile& graph, const Overrides& overrides) {
  return budget_for_peak(minimum_peak(graph, overrides));
}

}  // namespace remat::scheduler
