// Policy `chain`: the dynamic program of chain.h, the chain of stages a
// profiled graph is cut into, and the plan it gives.
#include "scheduler/policies/chain.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "scheduler/policies/policy.h"

namespace remat::scheduler {
namespace {

// Where a choice's groups start and end: [first, last] stage, kept,
// replayed or planned by one of the first stage's options.
struct Group {
  size_t first, last;
  bool replayed;
  int option = -1;
};

std::vector<Group> groups_of(const ChainChoice& choice) {
  std::vector<Group> groups;
  for (size_t s = 0; s < choice.size(); ++s) {
    if (choice[s] == kKept) {
      groups.push_back({s, s, false});
      continue;
    }
    size_t last = s;
    if (choice[s] >= kOption) {  // kOption + k, then kOptionOn...
      while (last + 1 < choice.size() && choice[last + 1] == kOptionOn) ++last;
      groups.push_back({s, last, false, choice[s] - kOption});
    } else {  // kReplayedOn..., then kReplayedToHere
      while (last + 1 < choice.size() && choice[last] == kReplayedOn) ++last;
      groups.push_back({s, last, true});
    }
    s = last;
  }
  return groups;
}

const StageCost& cost_of(const ChainModel& model, const Group& g) {
  if (g.option >= 0) return model.options_at(g.first).at(static_cast<size_t>(g.option)).cost;
  return g.replayed ? model.replay[g.first][g.last - g.first] : model.keep[g.first];
}

// Faster, or as fast with a lower peak.
bool faster(double ms_a, int64_t peak_a, double ms_b, int64_t peak_b) {
  return ms_a < ms_b || (ms_a == ms_b && peak_a < peak_b);
}

// A prefix of groups up to a stage boundary: what it holds, its time and
// peak, and the group that ended it.
struct State {
  int64_t held = 0;
  double ms = 0;
  int64_t peak = 0;
  std::shared_ptr<const State> parent;
  Group group{0, 0, false};
};
using States = std::vector<std::shared_ptr<const State>>;

// Keeps the Pareto set in (held, ms, peak): a prefix another beats or
// equals on all three can never lead to a better choice. In order of held,
// a prefix is dominated when one kept before it is no slower and peaks no
// higher: `lowest` holds, of the kept ones, the lowest peak at each time
// (a staircase: peaks fall as times grow), so that the test is one lookup,
// not a scan of every kept prefix (a Llama of 32 blocks, 68 stages: tens
// of thousands of prefixes).
States pareto(States states) {
  std::sort(states.begin(), states.end(), [](const auto& a, const auto& b) {
    if (a->held != b->held) return a->held < b->held;
    return faster(a->ms, a->peak, b->ms, b->peak);
  });
  States kept;
  std::map<double, int64_t> lowest;  // ms -> the lowest peak kept at or below it
  for (const auto& candidate : states) {
    auto after = lowest.upper_bound(candidate->ms);  // the first step slower than the candidate
    if (after != lowest.begin() && std::prev(after)->second <= candidate->peak) continue;  // dominated
    kept.push_back(candidate);
    // The steps it dominates (no faster, no lower) go; it takes their place.
    auto at = lowest.lower_bound(candidate->ms);
    while (at != lowest.end() && at->second >= candidate->peak) at = lowest.erase(at);
    lowest.emplace(candidate->ms, candidate->peak);
  }
  return kept;
}

// The Pareto set of whole choices that fit `budget`, empty if none does.
States final_states(const ChainModel& model, int64_t budget) {
  const size_t n = model.size();
  for (size_t i = 0; i < model.options.size(); ++i) {
    for (const StageOption& option : model.options[i]) {
      REMAT_CHECK(i < n && option.last >= i && option.last < n, "chain: an option of stage {} ends at stage {}, "
                  "outside {}..{}", i, option.last, i, n - 1);
    }
  }
  std::vector<States> at(n + 1);  // at[b]: prefixes ending before stage b
  at[0].push_back(std::make_shared<State>());
  for (size_t b = 0; b < n; ++b) {
    at[b] = pareto(std::move(at[b]));
    for (const auto& state : at[b]) {
      auto extend = [&](const Group& g) {
        const StageCost& c = cost_of(model, g);
        const int64_t peak = std::max(state->peak, state->held + c.peak);
        if (peak > budget) return;
        at[g.last + 1].push_back(
            std::make_shared<State>(State{state->held + c.held, state->ms + c.recompute_ms, peak, state, g}));
      };
      extend({b, b, false});
      for (size_t last = b; last < n; ++last) extend({b, last, true});
      const std::vector<StageOption>& options = model.options_at(b);
      for (size_t k = 0; k < options.size(); ++k) extend({b, options[k].last, false, static_cast<int>(k)});
    }
  }
  return pareto(std::move(at[n]));
}

ChainChoice choice_of(const State* state, size_t n) {
  ChainChoice choice(n, kKept);
  for (const State* s = state; s->parent; s = s->parent.get()) {
    const Group& g = s->group;
    if (g.option >= 0) {
      choice[g.first] = kOption + g.option;
      for (size_t i = g.first + 1; i <= g.last; ++i) choice[i] = kOptionOn;
    } else if (g.replayed) {
      for (size_t i = g.first; i < g.last; ++i) choice[i] = kReplayedOn;
      choice[g.last] = kReplayedToHere;
    }
  }
  return choice;
}

}  // namespace

bool valid(const ChainModel& model, const ChainChoice& choice) {
  const size_t n = model.size();
  if (choice.size() != n) return false;
  for (size_t s = 0; s < n; ++s) {
    const int mode = choice[s];
    if (mode == kKept) continue;
    if (mode == kReplayedOn || mode == kReplayedToHere) {  // kReplayedOn... then kReplayedToHere
      while (s < n && choice[s] == kReplayedOn) ++s;
      if (s == n || choice[s] != kReplayedToHere) return false;
      continue;
    }
    const std::vector<StageOption>& options = model.options_at(s);
    if (mode < kOption || static_cast<size_t>(mode - kOption) >= options.size()) return false;
    const size_t last = options[static_cast<size_t>(mode - kOption)].last;
    if (last < s || last >= n) return false;
    for (size_t t = s + 1; t <= last; ++t) {
      if (choice[t] != kOptionOn) return false;
    }
    s = last;
  }
  return true;
}

int64_t peak_of(const ChainModel& model, const ChainChoice& choice) {
  int64_t held = 0, peak = 0;
  for (const Group& g : groups_of(choice)) {
    const StageCost& c = cost_of(model, g);
    peak = std::max(peak, held + c.peak);
    held += c.held;
  }
  return peak;
}

double recompute_ms_of(const ChainModel& model, const ChainChoice& choice) {
  double ms = 0;
  for (const Group& g : groups_of(choice)) ms += cost_of(model, g).recompute_ms;
  return ms;
}

std::optional<ChainChoice> solve_chain(const ChainModel& model, int64_t budget) {
  const States states = final_states(model, budget);
  if (states.empty()) return std::nullopt;
  const auto best = std::min_element(states.begin(), states.end(), [](const auto& a, const auto& b) {
    return faster(a->ms, a->peak, b->ms, b->peak);
  });
  return choice_of(best->get(), model.size());
}

std::vector<ChainChoice> chain_front(const ChainModel& model, int64_t max_peak) {
  States states = final_states(model, max_peak);
  std::sort(states.begin(), states.end(), [](const auto& a, const auto& b) {
    return a->peak != b->peak ? a->peak < b->peak : a->ms < b->ms;
  });
  std::vector<ChainChoice> front;
  double least_ms = std::numeric_limits<double>::infinity();
  for (const auto& state : states) {
    if (state->ms >= least_ms) continue;  // a lower peak costs no more
    least_ms = state->ms;
    front.push_back(choice_of(state.get(), model.size()));
  }
  return front;
}

std::optional<ChainChoice> solve_chain_exhaustive(const ChainModel& model, int64_t budget) {
  const size_t n = model.size();
  ChainChoice choice(n, kKept);
  std::optional<ChainChoice> best;
  double best_ms = 0;
  int64_t best_peak = 0;
  auto last_mode = [&](size_t i) {  // kOptionOn and the options only where a model has them
    if (model.options.empty()) return static_cast<int>(kReplayedOn);
    return std::max<int>(kOptionOn, kOption + static_cast<int>(model.options_at(i).size()) - 1);
  };
  while (true) {
    if (valid(model, choice)) {
      const int64_t peak = peak_of(model, choice);
      const double ms = recompute_ms_of(model, choice);
      if (peak <= budget && (!best || faster(ms, peak, best_ms, best_peak))) {
        best = choice;
        best_ms = ms;
        best_peak = peak;
      }
    }
    size_t i = 0;
    while (i < n && ++choice[i] > last_mode(i)) choice[i++] = kKept;
    if (i == n) break;
  }
  return best;
}

namespace policies {

using search::Candidate;
using search::Context;

// Tags of a choice: every decidable value of a replayed group dropped but
// the group's last output; the values no backward reads settled within
// their group (a replay never reaches into the stage before its group, so
// that a group's simulation holds all it costs). An option's group is
// kept: its tags are its owner's (milp_blocks.cpp).
std::vector<Tag> tags_of(const Context& c, const Chain& chain, const ChainChoice& choice) {
  std::vector<Tag> tags = search::all(c, Tag::Keep);
  std::vector<bool> inside(c.graph.size(), false);
  for (const Group& g : groups_of(choice)) {
    if (!g.replayed) continue;
    const int64_t first = chain.stages[g.first].first, last = chain.stages[g.last].second;
    const int64_t end = g.last + 1 == chain.stages.size() ? last + 1 : last;
    for (int64_t v = first; v < end; ++v) {
      inside[v] = true;
      if (c.decidable(v)) tags[v] = Tag::Recompute;
    }
  }
  search::settle_unread(c, tags, [&](int64_t v) { return inside[v]; });
  return tags;
}

StageCost group_cost(const Chain& chain, const Simulation& sim, size_t first, size_t last) {
  const int64_t a = chain.stages[first].first, b = chain.stages[last].second;
  const int64_t level = sim.level_before_forward[a];
  const int64_t next =
      last + 1 < chain.stages.size() ? sim.level_before_forward[chain.stages[last + 1].first] : sim.saved_bytes_after_forward;
  StageCost cost{.held = next - level};
  for (int64_t v = a; v <= b; ++v) {
    cost.peak = std::max({cost.peak, sim.forward_peak_at[v] - level, sim.backward_peak_at[v] - level});
    cost.recompute_ms += sim.replay_ms[v];
  }
  return cost;
}

Chain chain_of(const Context& c) {
  Chain chain;
  int64_t first = 0;
  for (int64_t cut : search::cuts(c)) {
    chain.stages.push_back({first, cut});
    first = cut + 1;
  }
  chain.stages.push_back({first, c.root()});
  const size_t n = chain.stages.size();
  const Simulation kept = c.simulate(search::all(c, Tag::Keep));
  chain.model.replay.resize(n);
  for (size_t s = 0; s < n; ++s) chain.model.keep.push_back(group_cost(chain, kept, s, s));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i; j < n; ++j) {
      ChainChoice choice(n, kKept);
      for (size_t s = i; s < j; ++s) choice[s] = kReplayedOn;
      choice[j] = kReplayedToHere;
      chain.model.replay[i].push_back(group_cost(chain, c.simulate(tags_of(c, chain, choice)), i, j));
    }
  }
  return chain;
}

std::string describe(const ChainChoice& choice) {
  std::string groups, options;
  for (const Group& g : groups_of(choice)) {
    if (!g.replayed && g.option < 0) continue;
    std::string& list = g.replayed ? groups : options;
    if (!list.empty()) list += ", ";
    list += g.first == g.last ? fmt::format("{}", g.first) : fmt::format("{}-{}", g.first, g.last);
    if (g.option >= 0) list += fmt::format(" ({})", g.option + 1);
  }
  return fmt::format("chain of {} stages, replaying {}{}", choice.size(), groups.empty() ? "none" : groups,
                     options.empty() ? "" : ", planned apart " + options);
}

namespace {

// Every plan of the model's front, simulated.
std::vector<Candidate> front_plans(const Context& c, const Chain& chain) {
  std::vector<Candidate> plans;
  for (const ChainChoice& choice : chain_front(chain.model)) {
    std::vector<Tag> tags = tags_of(c, chain, choice);
    Simulation sim = c.simulate(tags);
    plans.push_back({std::move(tags), std::move(sim), "chain: front, " + describe(choice)});
  }
  return plans;
}

}  // namespace

std::vector<Candidate> chain_plans(const Context& c) {
  if (c.graph.size() == 0) return {};
  return front_plans(c, chain_of(c));
}

// The model is additive where the engine is nearly so: where the simulator
// finds the model's optimum over the target, the model is asked again with
// the excess taken off (a few times); the front's plans compete too (one
// of them may fit between a lowered target and the real one).
Answer plan_chain(const Request& request) {
  const Context& c = request.c;
  if (!request.budget || c.graph.size() == 0) {
    return {.tags = search::all(c, Tag::Keep), .detail = "no budget: nothing to trade, every value kept",
            .chosen_by = "chain"};
  }
  const Chain chain = chain_of(c);
  std::vector<Candidate> pool = front_plans(c, chain);
  int64_t target = request.target;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::optional<ChainChoice> choice = solve_chain(chain.model, target);
    if (!choice) break;
    std::vector<Tag> tags = tags_of(c, chain, *choice);
    Simulation sim = c.simulate(tags);
    const bool fits = sim.peak_bytes <= request.target;
    pool.push_back({std::move(tags), sim, fmt::format("chain: optimum of the model{}, {}",
                                                      attempt ? fmt::format(" (try {})", attempt + 1) : "",
                                                      describe(*choice))});
    if (fits) break;
    target -= std::max<int64_t>(sim.peak_bytes - request.target, request.target / 100 + 1);
  }
  pool = with_current(request, std::move(pool));
  const Candidate* best = search::fastest_fitting(pool, request.target);
  if (!best) return fall_back(request, "chain");
  return {.tags = best->tags, .detail = best->origin, .chosen_by = owner_of(*best, "chain")};
}

}  // namespace policies
}  // namespace remat::scheduler
