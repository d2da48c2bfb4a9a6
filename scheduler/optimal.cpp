// The chain solver; see optimal.h.
#include "scheduler/optimal.h"

#include <algorithm>
#include <memory>

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

std::optional<std::vector<int>> solve_chain(const ChainModel& model, int64_t budget) {
  std::vector<std::shared_ptr<const State>> states{std::make_shared<State>()};
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
    if (states.empty()) return std::nullopt;
  }
  const auto best = std::min_element(states.begin(), states.end(), [](const auto& a, const auto& b) {
    return better(a->ms, a->peak, b->ms, b->peak);
  });
  std::vector<int> modes;
  for (const State* s = best->get(); s->parent; s = s->parent.get()) modes.push_back(s->mode);
  std::reverse(modes.begin(), modes.end());
  return modes;
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

}  // namespace remat::scheduler
