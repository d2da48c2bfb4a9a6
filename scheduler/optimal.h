// The `optimal` policy's solver: the least recompute time under a byte
// budget for a chain of stages, by dynamic programming over the chain (in
// the spirit of Beaumont et al., "Optimal checkpointing for heterogeneous
// chains", restricted to what the engine executes: a replayed value is
// rebuilt once and held until its last use, so each stage is either kept,
// replayed whole from its kept input, or as one of the whole-graph plans the
// planner offers restricts it).
//
// A stage s in mode m holds held[m] bytes from its forward to its backward,
// rises peak[m] above everything held before it while it runs (forward or
// backward, replays included) and costs recompute_ms[m]. A choice of modes
// fits budget B when, for every s, sum of held of the stages before s plus
// peak of s is at most B. solve_chain keeps, stage by stage, the Pareto set
// of (bytes held so far, time so far): exact, and fast because dominated
// prefixes are pruned.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace remat::scheduler {

struct StageCost {
  int64_t held = 0;
  int64_t peak = 0;
  double recompute_ms = 0;
};

struct ChainModel {
  std::vector<std::vector<StageCost>> stages;  // per stage, per mode
  // The model's peak and time of a choice of modes (one per stage).
  int64_t peak_of(const std::vector<int>& modes) const;
  double recompute_ms_of(const std::vector<int>& modes) const;
};

// The modes of least recompute time that fit `budget` (ties: the lower
// peak), or nothing when no choice fits.
std::optional<std::vector<int>> solve_chain(const ChainModel& model, int64_t budget);
// Every choice no other beats on both peak and time, lowest peak first
// (each with the least time for its peak): what `cost` without a budget
// searches for the lowest peak its replay allowance affords.
std::vector<std::vector<int>> chain_front(const ChainModel& model);
// The same by trying every choice (for tests: modes^stages of them).
std::optional<std::vector<int>> solve_chain_exhaustive(const ChainModel& model, int64_t budget);

}  // namespace remat::scheduler
