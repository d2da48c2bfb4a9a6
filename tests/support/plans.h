// Test support: naming a plan in a failure message; a profile as a noisy
// clock would give it.
#pragma once

#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/autograd.h"
#include "scheduler/plan.h"
#include "scheduler/profile.h"

namespace remat::testing {

// The rule the tests give policy custom: replay every memory-bound op's
// output (elementwise ops, norms, softmax), keep the GEMMs'.
inline std::vector<Tag> replay_memory_bound(const scheduler::GraphProfile& graph) {
  std::vector<Tag> tags;
  for (const scheduler::NodeProfile& node : graph.nodes) {
    tags.push_back(node.compute_bound || node.position + 1 == graph.size() ? Tag::Keep : Tag::Recompute);
  }
  return tags;
}

// Plan options of `policy` (policy custom with the rule above).
inline scheduler::PlanOptions options_of(const std::string& policy) {
  // The presets that need an argument get one that names parts of a GPT.
  const std::string named = policy == "every-n-blocks"      ? "every-n-blocks:2"
                            : policy == "recompute-modules" ? "recompute-modules:attn,mlp,norm"
                                                            : policy;
  return {.policy = named, .custom = policy == "custom" ? scheduler::CustomPolicy(replay_memory_bound) : nullptr};
}

// The presets that name blocks or modules, which an MLP has none of.
inline bool names_gpt_parts(const std::string& policy) {
  return policy == "every-n-blocks" || policy == "recompute-modules";
}

// The positions a plan replays, e.g. " 0 3 7" (" none" if it replays
// nothing): enough to rebuild a failing plan by hand.
inline std::string replayed_positions(const std::vector<Tag>& tags) {
  std::string positions;
  for (size_t v = 0; v < tags.size(); ++v) {
    if (tags[v] == Tag::Recompute) positions += fmt::format(" {}", v);
  }
  return positions.empty() ? " none" : positions;
}

// `profile` as a noisy clock would give it: each node's forward, backward
// and replay times scaled by its own factor in [0.5, 2), as if measured on
// another run; the step's time scaled too. Bytes stay as they are.
inline scheduler::GraphProfile with_noisy_times(const scheduler::GraphProfile& profile, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> factor(0.5, 2.0);
  scheduler::GraphProfile noisy = profile;
  for (scheduler::NodeProfile& node : noisy.nodes) {
    node.forward_ms *= factor(rng);
    node.backward_ms *= factor(rng);
    node.replay_ms *= factor(rng);
    node.replay_in_place_ms *= factor(rng);
  }
  noisy.step_ms *= factor(rng);
  return noisy;
}

}  // namespace remat::testing
