// What the scheduler's Profiler measures of each node it observes: times,
// the rise of transient bytes over forward and backward, the bytes of each
// gradient. The Profiler keeps one NodeMeasures per node, by the node's
// record (scheduler/profiler.h); a profile row (NodeProfile,
// scheduler/profile.h) is the node's facts (engine/record.h) and these.
#pragma once

#include <cstdint>
#include <vector>

namespace remat::scheduler {

// NodeMeasures::grad_bytes for an input whose gradient is undefined, or is a
// view of the node's incoming gradient (no bytes of its own).
inline constexpr int64_t kNoGradient = -1;
inline constexpr int64_t kGradientAliasesOutput = -2;

// What the Profiler measured of one node (Note [Graph events]); a node it
// did not observe has these zeros (observed false). Times are wall times
// less first touches on the CPU, and CUDA events' times on a GPU.
struct NodeMeasures {
  bool observed = false;  // a Profiler saw the node's forward
  // The forward's wall time in milliseconds (first touches of fresh memory
  // left out: engine/allocator.h), and how far live activation + temporary
  // bytes rose above their level at the start of the forward call (output
  // and side results included).
  double forward_ms = 0;
  int64_t forward_peak_bytes = 0;
  // The wall time of its latest replay (first touches left out, as for
  // forward_ms), into a new output or over an input (Note [Replays in
  // place]: in place an elementwise op runs about twice as fast as its
  // forward, and a replay into a new block can be slower than forward,
  // colder caches in backward); 0 for the kind it was not replayed so.
  double replay_ms = 0;
  double replay_in_place_ms = 0;
  // Filled by the first backward through the node: its time, how far
  // transient bytes rose over the call (its saved values already rebuilt),
  // and per input the bytes of a new gradient storage (or kNoGradient,
  // kGradientAliasesOutput).
  // A node whose backward() lets go of a saved value early
  // (Node::release_saved_now) is measured in two phases:
  // backward_peak_bytes is the rise before the release, and
  // backward_late_peak_bytes the rise after it, counted from the same start
  // as if the release had freed nothing (the simulator subtracts what it
  // frees under each plan); released_early indexes NodeFacts::saved, or is
  // -1.
  bool backward_ran = false;
  double backward_ms = 0;
  int64_t backward_peak_bytes = 0;
  int64_t backward_late_peak_bytes = 0;
  int released_early = -1;
  std::vector<int64_t> grad_bytes;
  // On the root of a backward pass only: the pass's wall time (replays,
  // gradient sums and leaf updates included), the part of it replays took
  // and the part first touches of fresh memory took (engine/allocator.h),
  // from its first run.
  double backward_pass_ms = 0;
  double backward_pass_replay_ms = 0;
  double backward_pass_first_touch_ms = 0;
};

}  // namespace remat::scheduler
