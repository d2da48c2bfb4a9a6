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
#include <optional>
#include <vector>

namespace remat::scheduler {

struct StageCost {
  int64_t held = 0;
  int64_t peak = 0;
  double recompute_ms = 0;
};

struct ChainModel {
  std::vector<StageCost> keep;                 // per stage, kept whole
  std::vector<std::vector<StageCost>> replay;  // replay[i][k]: stages i..i+k replayed as one group
  size_t size() const { return keep.size(); }
};

// Per stage: kKept, or replayed with its output kept (the group ends
// there) or dropped (the group goes on into the next stage; never the
// last stage's).
enum ChainMode : int { kKept = 0, kReplayedToHere = 1, kReplayedOn = 2 };
using ChainChoice = std::vector<int>;

bool valid(const ChainModel& model, const ChainChoice& choice);
int64_t peak_of(const ChainModel& model, const ChainChoice& choice);
double recompute_ms_of(const ChainModel& model, const ChainChoice& choice);

// The choice of least recompute time that fits `budget` (ties: the lower
// peak), or nothing when none fits.
std::optional<ChainChoice> solve_chain(const ChainModel& model, int64_t budget);
// Every choice no other beats on both peak and time, lowest peak first.
std::vector<ChainChoice> chain_front(const ChainModel& model);
// The same as solve_chain by trying every valid choice (for tests).
std::optional<ChainChoice> solve_chain_exhaustive(const ChainModel& model, int64_t budget);

}  // namespace remat::scheduler
