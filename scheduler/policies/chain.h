// Policy `chain`'s model and solver: the least recompute time under a byte
// budget over every choice of what to keep on a chain of stages, by dynamic
// programming (Beaumont, Eyraud-Dubois, Herrmann, Joly and Shilova,
// "Optimal checkpointing for heterogeneous chains", 2019: rotor), for the
// schedules the engine executes: a dropped value is rebuilt once, when
// backward first needs it, and held until its last use.
//
// The graph's cuts (search::cuts: one value crosses each) split it into
// stages. Each stage is either kept whole, or replayed in a group of
// consecutive stages i..j: every value inside them is dropped but j's
// output, which stays as the next stage's input (a checkpoint), and the
// group is rebuilt from i's input when backward reaches it. A group of
// stages costs what one simulation of it says (held: the bytes it adds
// from its forward to its backward; peak: how far it rises above what is
// held before it, in forward or in backward with its replays; its replay
// time), and a choice fits budget B when for every group g, the bytes held
// by the groups before g plus g's peak are at most B. The dynamic program
// keeps, at each stage boundary, the Pareto set of (held so far, time so
// far, peak so far) over the choices of the stages before it: exact for the
// model; the simulator checks the plan (chain.cpp).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/search.h"

namespace remat::scheduler {

struct StageCost {
  int64_t held = 0;
  int64_t peak = 0;
  double recompute_ms = 0;
};

// Another way to plan a group of stages, from the stage whose option it is
// to `last`: milp's hierarchy gives each block the plans CBC finds for it
// alone (Note [Blocks planned apart] in policies/milp_blocks.cpp).
struct StageOption {
  size_t last = 0;
  StageCost cost;
};

struct ChainModel {
  std::vector<StageCost> keep;                 // per stage, kept whole
  std::vector<std::vector<StageCost>> replay;  // replay[i][k]: stages i..i+k replayed as one group
  std::vector<std::vector<StageOption>> options;  // options[i]: groups from stage i (none if empty)
  size_t size() const { return keep.size(); }
  const std::vector<StageOption>& options_at(size_t i) const {
    static const std::vector<StageOption> none;
    return i < options.size() ? options[i] : none;
  }
};

// Per stage: kKept, or replayed with its output kept (the group ends
// there) or dropped (the group goes on into the next stage; never the
// last stage's); or kOption + k: the first stage of options[i][k], whose
// other stages are kOptionOn.
enum ChainMode : int { kKept = 0, kReplayedToHere = 1, kReplayedOn = 2, kOptionOn = 3, kOption = 4 };
using ChainChoice = std::vector<int>;

bool valid(const ChainModel& model, const ChainChoice& choice);
int64_t peak_of(const ChainModel& model, const ChainChoice& choice);
double recompute_ms_of(const ChainModel& model, const ChainChoice& choice);

// The choice of least recompute time that fits `budget` (ties: the lower
// peak), or nothing when none fits.
std::optional<ChainChoice> solve_chain(const ChainModel& model, int64_t budget);
// Every choice no other beats on both peak and time, lowest peak first
// (those of peak at most `max_peak`).
std::vector<ChainChoice> chain_front(const ChainModel& model,
                                     int64_t max_peak = std::numeric_limits<int64_t>::max());
// The same as solve_chain by trying every valid choice (for tests).
std::optional<ChainChoice> solve_chain_exhaustive(const ChainModel& model, int64_t budget);

namespace policies {

// The graph as a chain (chain.cpp): its stages (first, last position),
// cut at search::cuts, and their model, without options.
struct Chain {
  std::vector<std::pair<int64_t, int64_t>> stages;
  ChainModel model;
};
Chain chain_of(const search::Context& c);
// The tags of a choice of `chain`'s groups; an option's stages are kept
// (its tags are the caller's to set).
std::vector<Tag> tags_of(const search::Context& c, const Chain& chain, const ChainChoice& choice);
// Stages first..last's costs, read off the simulation of a plan that
// differs from keep-all in those stages alone.
StageCost group_cost(const Chain& chain, const Simulation& sim, size_t first, size_t last);
// "chain of 29 stages, replaying 3-5, 9, planned apart 10-11 (2)".
std::string describe(const ChainChoice& choice);

}  // namespace policies
}  // namespace remat::scheduler
