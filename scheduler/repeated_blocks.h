// Repeated blocks: the named blocks of a profiled graph (NodeProfile::block,
// e.g. "transformer.h.3") whose sub-graphs are identical to an earlier one,
// node for node, so that a planner can solve one and reuse its decisions
// (HiRemate, ICML 2025; torchtitan's planner: identical layers planned
// once). Internal to scheduler/: milp ties the tags of repeated blocks
// (policies/milp.h, Note [Repeated blocks solved once]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/search.h"

namespace remat::scheduler {

struct RepeatedBlocks {
  // Per node: the node at the same offset in the first block identical to
  // its own, or -1 (outside any block, in a block of its own kind, or in
  // that first block itself).
  std::vector<int64_t> twin_of;
  int64_t blocks = 0;   // named blocks, each a run of consecutive positions
  int64_t repeats = 0;  // blocks identical to an earlier one
  int64_t kinds = 0;    // distinct blocks that repeat (each solved once)
  bool any() const { return repeats > 0; }
};

// Two blocks are identical when, node for node in position order, their
// ops, shapes, dtypes, bytes, FLOPs, saved values, views, gradient bytes,
// measured rises, the tags rules force and whether backward reads them
// agree, and every edge and handle release has the same offset from the
// block's first position (an edge from outside the block included: a
// block's input comes from just before it). Times may differ: they choose
// among plans, they do not make them.
RepeatedBlocks repeated_blocks(const search::Context& c);

}  // namespace remat::scheduler
