// The events the engine emits as it records and runs a graph, and the scope
// that chooses who hears them (docs/design.md: measurement beside the mechanism).
//
// Note [Graph events]
// The engine records a graph and runs it; it measures nothing. Whoever
// observes a recording measures it: the scheduler's Profiler times each
// forward, replay and backward and watches the allocator around them, into
// NodeRecord::measured, which the profile and the liveness simulator read.
// A node keeps the observer that was current on its thread when it was
// recorded (GraphObserverScope), and every later event of that node goes
// there: its replays and its backward run after the scope has closed (a
// Checkpointer's step records its forward in a scope and runs backward
// outside it). A node recorded under no observer emits nothing.
//
// Per node, in order: forward_started and forward_finished around its
// forward() (the node's record is not yet filled), then recorded once its
// record, edges and saved values are in place; replay_started and replayed
// around each replay (Note [Recompute]); backward_started and
// backward_finished around its backward(), with saved_value_releasing and
// saved_value_released around an early release (Node::release_saved_now)
// between them. pass_started and pass_finished bracket a backward pass, sent
// to the root's observer. Where a forward, replay, backward or pass throws,
// `failed` takes the place of its finishing event, so that every started
// event ends once, innermost first.
#pragma once

#include <memory>

#include "engine/device.h"
#include "engine/tensor.h"

namespace remat {

class Node;

class GraphObserver {
 public:
  virtual ~GraphObserver() = default;

  // apply_op: the forward of a node it will record is about to run on
  // tensors of `device`, and has run.
  virtual void forward_started(Node& node, Device device) {}
  virtual void forward_finished(Node& node) {}
  // The node is in the graph: record, edges and saved values are set.
  virtual void recorded(Node& node) {}
  // rebuild(): a replay of the node's forward on inputs of `device`, which
  // wrote its output over an input or into a new block (Note [Replays in
  // place]).
  virtual void replay_started(Node& node, Device device) {}
  virtual void replayed(Node& node, bool in_place) {}
  // The node's backward() is about to run (its saved values materialised),
  // and has returned `grads`.
  virtual void backward_started(Node& node, const Tensor& grad_output) {}
  virtual void backward_finished(Node& node, const Tensor& grad_output, const Tensors& grads) {}
  // Around release_saved_now(): saved value `record_index` (an index into
  // NodeFacts::saved) is being freed during the node's backward.
  virtual void saved_value_releasing(Node& node) {}
  virtual void saved_value_released(Node& node, int record_index) {}
  // A backward pass from `root` (a tensor on `device`) begins, and has run
  // every node.
  virtual void pass_started(Node& root, Device device) {}
  virtual void pass_finished(Node& root) {}
  // The innermost started event of `node` threw (it is not finished).
  virtual void failed(Node& node) {}
};

// The observer that nodes recorded on this thread keep (null: none).
const std::shared_ptr<GraphObserver>& current_graph_observer();

// Makes `observer` current on this thread while it lives; scopes nest.
class GraphObserverScope {
 public:
  explicit GraphObserverScope(std::shared_ptr<GraphObserver> observer);
  ~GraphObserverScope();
  GraphObserverScope(const GraphObserverScope&) = delete;
  GraphObserverScope& operator=(const GraphObserverScope&) = delete;

 private:
  std::shared_ptr<GraphObserver> previous_;
};

}  // namespace remat
