// The profile of a recorded graph: one row per node in recording order
// (op, output shape and bytes, FLOPs, measured forward time, block), and the
// graph's signature (its ops and shapes), under which a plan will be cached.
// This is what the policies read; the recompute mechanism itself lives in
// engine/. Called by `remat explain` and, later, by the planner.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/autograd.h"

namespace remat::scheduler {

struct NodeProfile {
  int64_t position = 0;  // 0, 1, ... in recording order
  std::string op;
  std::vector<Shape> input_shapes;
  Shape output_shape;
  int64_t output_bytes = 0;  // 0 for views: they cost no storage
  int64_t flops = 0;
  double forward_ms = 0;
  std::string block;  // "" outside any block
  Tag tag = Tag::Keep;
  std::string reason;  // why it got its tag, when profile_graph was given a way to say
  // Forward milliseconds per MiB of output, the price of recomputing a byte
  // (infinite for views, which free nothing).
  double ms_per_mib() const;
};

struct GraphProfile {
  std::vector<NodeProfile> nodes;
  uint64_t signature = 0;  // equal for graphs of the same ops and shapes
  int64_t total_output_bytes() const;
  double total_forward_ms() const;
};

// Walks the graph that produced `root` (leaf accumulators excluded);
// `explain`, if given, writes each node's reason.
GraphProfile profile_graph(const Tensor& root, const std::function<std::string(const Node&)>& explain = {});

}  // namespace remat::scheduler
