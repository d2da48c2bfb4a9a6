// Blocks planned apart: milp's hierarchy for graphs whose blocks repeat
// (Note [Blocks planned apart] in milp_blocks.cpp). Each kind of block gets
// a few plans of its own from CBC, each block a choice among them, kept or
// replayed, by chain's dynamic program; milp.cpp starts its search from
// the plans it gives. Internal to the milp policy.
#pragma once

#include <cstdint>
#include <vector>

#include "scheduler/repeated_blocks.h"
#include "scheduler/search.h"

namespace remat::scheduler {

struct BlocksApart {
  // Simulated, in the order tried (some may miss the target): the model's
  // fastest choice that it says fits, then faster ones while they fit, or
  // slower ones until one does.
  std::vector<search::Candidate> plans;
  int64_t segments = 0;  // the chain's runs of stages: one per block, and the runs between them
  int64_t solved = 0;    // the segments CBC planned (a twin takes its first twin's plans)
  int64_t options = 0;   // the options they gave, over all segments
  int64_t solves = 0;    // CBC's programs, over all of them
};

// Plans of peak at most `target` (checked by simulation), or none where no
// segment is a twin of another. `seeds` (the other policies' plans) give
// each segment their tags in it as options too. CBC's programs share
// `time_limit_s` (each segment an even share of what is left); the chain
// model's simulations and its dynamic program come on top.
BlocksApart plan_blocks_apart(const search::Context& c, int64_t target, const RepeatedBlocks& repeats,
                              const std::vector<search::Candidate>& seeds, double time_limit_s);

}  // namespace remat::scheduler
