// The `optimal` policy: the chain solver of optimal.h and (namespace search)
// how a profiled graph becomes a chain of stages to solve.
#include "scheduler/optimal.h"

#include <algorithm>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "scheduler/search.h"

namespace remat::scheduler {

int64_t ChainModel::peak_of(const std::vector<int>& modes) const {
  int64_t held = 0, peak = 0;
  for (size_t s = 0; s < stages.size(); ++s) {
    const StageCost& c = stages[s][modes[s]];
    peak = std::max(peak, held + c.peak);
    held += c.held;
  }
  return peak;
}

double ChainModel::recompute_ms_of(const std::vector<int>& modes) const {
  double ms = 0;
  for (size_t s = 0; s < stages.size(); ++s) ms += stages[s][modes[s]].recompute_ms;
  return ms;
}

namespace {

// A prefix of choices: what it holds, its time and peak, and how it was made.
struct State {
  int64_t held = 0;
  double ms = 0;
  int64_t peak = 0;
  std::shared_ptr<const State> parent;
  int mode = -1;
};

bool better(double ms_a, int64_t peak_a, double ms_b, int64_t peak_b) {
  return ms_a < ms_b || (ms_a == ms_b && peak_a < peak_b);
}

}  // namespace

namespace {

using States = std::vector<std::shared_ptr<const State>>;

// The Pareto set of whole choices that fit `budget`, empty if none does.
States final_states(const ChainModel& model, int64_t budget) {
  States states{std::make_shared<State>()};
  for (const auto& stage : model.stages) {
    std::vector<std::shared_ptr<const State>> next;
    for (const auto& state : states) {
      for (int mode = 0; mode < static_cast<int>(stage.size()); ++mode) {
        const StageCost& c = stage[mode];
        const int64_t peak = std::max(state->peak, state->held + c.peak);
        if (peak > budget) continue;
        next.push_back(std::make_shared<State>(State{state->held + c.held, state->ms + c.recompute_ms, peak, state, mode}));
      }
    }
    // Keep the Pareto set in (held, ms, peak): a state another beats or
    // equals on all three can never lead to a better choice.
    std::sort(next.begin(), next.end(), [](const auto& a, const auto& b) {
      if (a->held != b->held) return a->held < b->held;
      return better(a->ms, a->peak, b->ms, b->peak);
    });
    states.clear();
    for (const auto& candidate : next) {
      const bool dominated = std::any_of(states.begin(), states.end(), [&](const auto& kept) {
        return kept->ms <= candidate->ms && kept->peak <= candidate->peak;  // kept->held <= candidate->held by order
      });
      if (!dominated) states.push_back(candidate);
    }
    if (states.empty()) return states;
  }
  return states;
}

std::vector<int> modes_of(const State* state) {
  std::vector<int> modes;
  for (const State* s = state; s->parent; s = s->parent.get()) modes.push_back(s->mode);
  std::reverse(modes.begin(), modes.end());
  return modes;
}

}  // namespace

std::optional<std::vector<int>> solve_chain(const ChainModel& model, int64_t budget) {
  const States states = final_states(model, budget);
  if (states.empty()) return std::nullopt;
  const auto best = std::min_element(states.begin(), states.end(), [](const auto& a, const auto& b) {
    return better(a->ms, a->peak, b->ms, b->peak);
  });
  return modes_of(best->get());
}

std::vector<std::vector<int>> chain_front(const ChainModel& model) {
  States states = final_states(model, std::numeric_limits<int64_t>::max());
  std::sort(states.begin(), states.end(), [](const auto& a, const auto& b) {
    return a->peak != b->peak ? a->peak < b->peak : a->ms < b->ms;
  });
  std::vector<std::vector<int>> front;
  double least_ms = std::numeric_limits<double>::infinity();
  for (const auto& state : states) {
    if (state->ms >= least_ms) continue;  // a lower peak costs no more
    least_ms = state->ms;
    front.push_back(modes_of(state.get()));
  }
  return front;
}

std::optional<std::vector<int>> solve_chain_exhaustive(const ChainModel& model, int64_t budget) {
  const size_t n = model.stages.size();
  std::vector<int> modes(n, 0);
  std::optional<std::vector<int>> best;
  double best_ms = 0;
  int64_t best_peak = 0;
  while (true) {
    const int64_t peak = model.peak_of(modes);
    const double ms = model.recompute_ms_of(modes);
    if (peak <= budget && (!best || better(ms, peak, best_ms, best_peak))) {
      best = modes;
      best_ms = ms;
      best_peak = peak;
    }
    size_t i = 0;
    while (i < n && ++modes[i] == static_cast<int>(model.stages[i].size())) modes[i++] = 0;
    if (i == n) break;
  }
  return best;
}

namespace search {
namespace {

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
      if (c.decidable(v) && (v != last || s + 1 == stages.size())) tags[v] = Tag::Recompute;
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

}  // namespace

std::vector<Candidate> chain_front_plans(const Context& c, const std::vector<Candidate>& greedy) {
  const Chain chain = chain_of(c, greedy);
  std::vector<Candidate> plans;
  for (const std::vector<int>& modes : chain_front(chain.model)) {
    std::vector<Tag> tags = combine(c, chain, modes);
    Simulation sim = c.simulate(tags);
    plans.push_back({std::move(tags), std::move(sim),
                     fmt::format("stage modes {} from the chain's front", fmt::join(modes, ""))});
  }
  return plans;
}

std::vector<Tag> optimal_tags(const Context& c, std::optional<int64_t> budget, const std::vector<Candidate>& extra,
                              std::string& why) {
  const std::vector<Candidate> greedy = greedy_path(c);
  const Chain chain = chain_of(c, greedy);
  const int64_t unbounded = std::numeric_limits<int64_t>::max();
  const int64_t fits = budget ? planning_target(*budget) : unbounded;
  // Besides the chain's plans, the whole-graph plans it was built from
  // compete: the model's stages cannot express every one of them; and
  // `cost`'s whole pool among them, so that optimal never replays longer
  // than cost within a budget.
  std::vector<Candidate> offered = descent(c, greedy);
  offered.insert(offered.end(), extra.begin(), extra.end());
  for (const std::vector<Tag>& plan : chain.mode_plans) offered.push_back({plan, c.simulate(plan), "a single mode"});
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
  const Candidate* best = fastest_fitting(offered, fits);
  REMAT_CHECK(best, "plan: optimal found no plan within {} bytes among {} (make_plan checked that one fits)", fits,
              offered.size());
  why = best->origin;
  return best->tags;
}

}  // namespace search
}  // namespace remat::scheduler
