// The liveness simulator: the activation and temporary bytes a plan will
// hold over one step (forward, backward and the replays backward asks for),
// predicted from the profile alone.
//
// It replays the engine's own rules (Note [Recompute] in engine/recompute.h,
// engine/backward.cpp) on reference-counted storages: an output lives while
// the caller holds it (NodeProfile::released_at) or a kept saved value reads
// it; a dropped one is rebuilt, with its dropped inputs, when a backward
// first reads it and freed after its last reader (a replay writes over an
// input nothing else holds any more: engine/recompute.h, Note [Replays in
// place]); gradients flow in the executor's order (latest recorded first)
// and are summed in buffers. A constant made between two nodes
// (GraphProfile::outside_inputs) lives while the caller, a saved value or a
// replay input holds it (engine/record.h, Note [Inputs from outside the
// graph]). Each op's own working memory is the rise measured when it ran
// (forward_peak_bytes, backward_peak_bytes). Planners call it to honour a
// budget; the bench compares its peak with the allocator's.
//
// It assumes the caller lets go of every output but the root once forward
// returns (loss = model(x); loss.backward()): logits kept across backward
// for a metric are memory it does not see.
#pragma once

#include <cstdint>
#include <vector>

#include "scheduler/profile.h"

namespace remat::scheduler {

struct Simulation {
  // Highest activation + temporary bytes above the step's starting level.
  int64_t peak_bytes = 0;
  // Held when forward ends (before backward starts).
  int64_t saved_bytes_after_forward = 0;
  // Replays backward needs, their cost (NodeProfile::replay_cost_ms) and FLOPs.
  int64_t replayed_nodes = 0;
  double recompute_ms = 0;
  int64_t recompute_flops = 0;
  // Per node: live bytes just before its forward, the peak during its
  // forward, the peak while backward processes it (the replays it asks for
  // included), whether it is replayed, the time of its replay (0 if not),
  // and whether that replay writes over an input (engine/recompute.h, Note
  // [Replays in place]).
  std::vector<int64_t> level_before_forward;
  std::vector<int64_t> forward_peak_at;
  std::vector<int64_t> backward_peak_at;
  std::vector<bool> replayed;
  std::vector<double> replay_ms;
  std::vector<bool> replayed_in_place;
};

// `tags` has one tag per node of `graph`; views of a dropped value are
// dropped whatever their tag says, as the engine does.
Simulation simulate(const GraphProfile& graph, const std::vector<Tag>& tags);

// `sim` (of some tags on a profile with the same bytes as `graph`, times
// aside) with its replays priced at `graph`'s times, as simulate(graph,
// tags) would give it: what it replays and when does not depend on times.
void reprice(const GraphProfile& graph, Simulation& sim);

// The tags the engine will really apply: a view of a dropped value is dropped.
std::vector<Tag> effective_tags(const GraphProfile& graph, std::vector<Tag> tags);

}  // namespace remat::scheduler
