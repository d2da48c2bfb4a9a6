// The `milp` policy's solver: the whole graph (not only its chain) as a
// mixed-integer program in the spirit of Checkmate (Jain et al., MLSys
// 2020), solved by COIN-OR CBC under a time limit, every plan it proposes
// checked by the liveness simulator (scheduler/simulate.h). The policy's
// entry, plan_milp (policies/policy.h), is at the end of milp.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/search.h"

namespace remat::scheduler {

struct MilpSolution {
  std::vector<Tag> tags;  // one per graph position; c.with_forced applied; simulate(graph, tags).peak_bytes <= target
  SolverReport report;  // scheduler/plan.h: status, objective, bound, gap, time, size
};

struct MilpOptions {
  double time_limit_s = kSolverTimeLimitS;
  // Where the graph has repeated blocks (scheduler/repeated_blocks.h), tie
  // each repeated block's tags to its first twin's (Note [Repeated blocks
  // solved once] in milp.cpp); the bound is then over those plans and the
  // ones the search started from (SolverReport::space).
  bool blocks_once = true;
  // Start from the other policies' plans (policies::pooled_plans) and,
  // where blocks repeat, from the plans of blocks planned apart
  // (milp_blocks.h); without, from keep-all alone.
  bool pooled = true;
  // The search, CBC's solves included, ends by time_limit_s
  // (cbc::solve_within); without, a solve may run its grace past it
  // (cbc.h), which the solves of blocks planned apart, given a few
  // milliseconds each, need to finish at all.
  bool ends_by_limit = true;
};

// The tags of least predicted recompute time whose simulated peak is at most
// `target` bytes, over every choice of tags of the taggable nodes (or those
// that repeat one block's, above) (search::Context::taggable: the engine's
// whole space; views follow their base, and a rule's tags stand), found by
// a MILP solved by CBC within the time limit (the best plan found so far
// when the limit is hit, with the bound and gap). nullopt when no plan
// within target was found; then *status, if given, is the solver's last verdict.
std::optional<MilpSolution> solve_milp(const search::Context& c, int64_t target, const MilpOptions& options = {},
                                       std::string* status = nullptr);

}  // namespace remat::scheduler
