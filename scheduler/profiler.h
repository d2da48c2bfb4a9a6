// The Profiler: the observer of the engine's graph events (engine/observer.h,
// Note [Graph events]) that measures what the profile and the liveness
// simulator read, into each node's NodeRecord::measured: forward, replay and
// backward times less first touches of fresh memory, the rise of transient
// bytes over each forward and over each node's first backward (in two
// phases around an early release), the bytes of each gradient, and a pass's
// time with the part its replays took. It counts the replays it saw too.
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
#include <vector>

#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/observer.h"

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
  void replay_started(Node& node) override;
  void replayed(Node& node, bool in_place) override;
  void backward_started(Node& node, const Tensor& grad_output) override;
  void backward_finished(Node& node, const Tensor& grad_output, const Tensors& grads) override;
  void saved_value_releasing(Node& node) override;
  void saved_value_released(Node& node, int record_index) override;
  void pass_started(Node& root) override;
  void pass_finished(Node& root) override;
  void failed(Node& node) override;

  // The replays of nodes it observed, on every thread, since it was made.
  ReplayStats replays() const;

 private:
  // One open event of this thread: a forward, a replay, a backward or a
  // pass, of `node`. Events nest (a replay inside a backward); an op that
  // threw leaves its frame, unwound at the next finish of an outer one.
  struct Frame;
  static std::vector<Frame>& frames();  // this thread's, innermost last
  // Takes the innermost open frame of `node` off this thread's stack (and
  // any left above it); empty if there is none.
  static std::optional<Frame> take(Node& node);

  mutable std::mutex mutex_;
  ReplayStats replays_;
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
