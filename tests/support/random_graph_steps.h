// What the random-graph tests share (random_graph_test.cpp,
// random_graph_budgets_test.cpp, random_graph_findings_test.cpp): a
// keep-all reference step with its gradients as bytes, a step recorded by a
// Checkpointer, the minimum budget a planner's error names, and the peak a
// plan measures when applied by position.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/allocator.h"
#include "ops/ops.h"
#include "scheduler/checkpointer.h"
#include "scheduler/profiler.h"
#include "scheduler/plan.h"
#include "scheduler/simulate.h"
#include "tests/support/errors.h"
#include "tests/support/plans.h"
#include "tests/support/random_graph.h"


namespace remat::scheduler::random_graph_testing {

inline constexpr uint64_t kBaseSeed = 20240601;

using testing::RandomGraph;

// Every leaf's gradient, as bytes (nullopt where it is undefined).
using Gradients = std::vector<std::optional<std::vector<unsigned char>>>;

inline Gradients gradients_of(const RandomGraph& graph) {
  Gradients grads;
  for (const Tensor& leaf : graph.leaves()) {
    const Tensor g = leaf.grad();
    if (!g.defined()) {
      grads.push_back(std::nullopt);
      continue;
    }
    const Tensor d = dense(g);
    const auto* bytes = static_cast<const unsigned char*>(d.raw_data());
    grads.emplace_back(std::vector<unsigned char>(bytes, bytes + d.nbytes()));
  }
  return grads;
}

// Names the first leaf whose gradient differs, or "".
inline std::string first_difference(const Gradients& expected, const Gradients& actual) {
  if (expected.size() != actual.size()) return fmt::format("{} leaves, expected {}", actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i].has_value() != actual[i].has_value()) return fmt::format("leaf {}: gradient defined differs", i);
    if (expected[i] && *expected[i] != *actual[i]) return fmt::format("leaf {}: gradient bytes differ", i);
  }
  return "";
}

struct Reference {
  Gradients grads;
  GraphProfile profile;  // of this keep-all step
};

// A step with no checkpointing at all.
inline Reference reference_step(RandomGraph& graph) {
  Profiling profiling;  // measure the graph recorded here
  graph.zero_grads();
  const Tensor loss = graph.build();
  loss.backward();
  return {gradients_of(graph), profile_graph(loss)};
}

inline int64_t peak_of(const GraphProfile& profile, const std::string& policy) {
  return make_plan(profile, {.policy = policy}).predicted.peak_bytes;
}

// The budget a planner's error says is needed: "... must be at least N bytes".
inline int64_t stated_minimum_budget(const GraphProfile& profile, const std::string& policy) {
  const std::string message = testing::error_of([&] { make_plan(profile, {.policy = policy, .budget = 1}); });
  const size_t at = message.find("must be at least ");
  if (at == std::string::npos) {
    ADD_FAILURE() << "no budget named in: " << message;
    return 0;
  }
  return std::stoll(message.substr(at + std::strlen("must be at least ")));
}

inline std::string trace(uint64_t seed, const RandomGraph& graph, const std::string& policy, std::optional<int64_t> budget) {
  return fmt::format("seed {} policy {} budget {} graph: {}", seed, policy,
                     budget ? std::to_string(*budget) : std::string("none"), graph.description());
}

// One step of `graph` recorded by `checkpointer`, its gradients zeroed first.
inline void recorded_step(Checkpointer& checkpointer, RandomGraph& graph) {
  graph.zero_grads();
  Tensor loss;
  {
    auto recording = checkpointer.record();
    loss = graph.build();
  }
  loss.backward();
}

// The peak that `plan`, made from `profile`, measures when applied by
// position to a rebuild of the graph (the Checkpointer's tag policy without
// its profiling step, so that plans of one profile can be compared).
inline int64_t measured_peak(RandomGraph& graph, const GraphProfile& profile, const Plan& plan) {
  graph.zero_grads();
  size_t position = 0;
  bool mismatch = false;
  Tensor loss;
  TransientPeakWatch watch;
  {
    RecomputeScope scope([&](const Node& node) {
      const size_t p = position++;
      if (p >= plan.tags.size() || profile.nodes[p].op != node.name()) {
        mismatch = true;
        return Tag::Keep;
      }
      return plan.tags[p];
    });
    loss = graph.build();
  }
  loss.backward();
  if (mismatch || position != plan.tags.size()) throw std::logic_error("measured_peak: the graph is not the profile's");
  return watch.rise();
}

}  // namespace remat::scheduler::random_graph_testing
