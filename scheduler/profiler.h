// The Profiler: the observer of the engine's graph events (engine/recording.h,
// Note [Graph events]) that measures what the profile and the liveness
// simulator read, into its own NodeMeasures per node (scheduler/measures.h,
// by the node's record; measured() reads them): forward, replay and
// backward times less first touches of fresh memory, the rise of transient
// bytes over each forward and over each node's first backward (in two
// phases around an early release), the bytes of each gradient, and a pass's
// time with the part its replays took. It counts the replays it saw too.
//
// On a GPU a kernel call only queues work, so the times are the GPU's: CUDA
// events around each span on the compute stream (engine/device_clock.h),
// read when the profile is taken (resolve(), which profile_graph and a
// Checkpointer call, once the step's work has been queued), and first
// touches of fresh memory, a CPU matter, are not subtracted.
//
//   Profiling profiling;                       // nodes recorded from here on are measured
//   Tensor loss = model.forward(ids, targets).loss;
//   loss.backward();
//   GraphProfile graph = profile_graph(loss);  // (scheduler/profile.h)
//
// A Checkpointer keeps one and records its steps under it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/device_clock.h"
#include "engine/recording.h"
#include "scheduler/measures.h"

namespace remat::scheduler {

// What replays cost, as one Profiler saw them.
struct ReplayStats {
  int64_t nodes = 0;
  double ms = 0;
  int64_t flops = 0;
};

class Profiler final : public GraphObserver {
 public:
  void forward_started(Node& node, Device device) override;
  void forward_finished(Node& node) override;
  void replay_started(Node& node, Device device) override;
  void replayed(Node& node, bool in_place) override;
  void backward_started(Node& node, const Tensor& grad_output) override;
  void backward_finished(Node& node, const Tensor& grad_output, const Tensors& grads) override;
  void saved_value_releasing(Node& node) override;
  void saved_value_released(Node& node, int record_index) override;
  void pass_started(Node& root, Device device) override;
  void pass_finished(Node& root) override;
  void failed(Node& node) override;

  // The replays of nodes it observed, on every thread, since it was made
  // (resolved first).
  ReplayStats replays();
  // Writes the GPU times still in flight into their measures, waiting for
  // the work they time; nothing to do on the CPU.
  void resolve();
  // What it measured of the node of `record` (zeros, observed false, for a
  // node it did not observe). GPU times once resolved.
  NodeMeasures measured(const NodeRecord& record) const;
  // How many nodes' measures it holds now.
  size_t nodes_measured() const;

 private:
  // One open event of this thread: a forward, a replay, a backward or a
  // pass, of `node`. Events nest (a replay inside a backward); an op that
  // threw leaves its frame, unwound at the next finish of an outer one.
  struct Frame;
  static std::vector<Frame>& frames();  // this thread's, innermost last
  // Takes the innermost open frame of `node` off this thread's stack (and
  // any left above it); empty if there is none.
  std::optional<Frame> take(Node& node);
  // The innermost open frame of this Profiler if it is `node`'s measured
  // backward, else null.
  Frame* open_backward(const Node& node);

  // The measures of `node`, made on first use, kept by its record (the
  // record is filled only after forward, so not by its sequence_nr). The
  // record, held weakly, says when they may go: once no one holds it (the
  // node, a planner's list), no profile can be taken of it.
  NodeMeasures& measures(const Node& node);

  // A GPU span whose time goes into a node's measures once resolved.
  struct Pending {
    enum class Field { Forward, Replay, ReplayInPlace, Backward, Pass };
    Field field = Field::Forward;
    std::shared_ptr<const NodeRecord> record;
    GpuSpan span;
    // A replay adds its time to its pass's; a pass reads the sum.
    std::shared_ptr<double> pass_replay_ms;
  };
  void add_pending(Pending pending);

  struct Entry {
    std::weak_ptr<const NodeRecord> record;
    NodeMeasures measured;
  };
  mutable std::mutex mutex_;
  ReplayStats replays_;
  std::vector<Pending> pending_;
  std::unordered_map<const NodeRecord*, Entry> measures_;
  size_t kept_after_pruning_ = 0;  // measures_.size() after the last pruning

};

// Makes a new Profiler current on this thread while it lives: the nodes
// recorded meanwhile are measured (their replays and backward too, whenever
// they run).
class Profiling {
 public:
  Profiling();
  const std::shared_ptr<Profiler>& profiler() const { return profiler_; }

 private:
  std::shared_ptr<Profiler> profiler_;
  GraphObserverScope scope_;
};

}  // namespace remat::scheduler
