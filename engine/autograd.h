// The graph: Node, the recorded op, and apply_op(), which runs an op's
// forward and, when a gradient is needed, records its node under the
// recording context (engine/recording.h); grad mode; the retain flag of a
// backward pass. What ops/ implement is Node's virtuals: forward() computes
// the output from the inputs and nothing else, so that the engine can
// replay it; save() keeps what backward() will read, as saved values;
// backward() maps the gradient of the output to one gradient per input;
// traits() says what the op is, as data. Every node has one output.
//
// The rest of the engine's graph, by idea:
//   record.h      what a node is as data: OpTraits, NodeFacts, NodeRecord
//   recompute.h   saved values, drop and replay, the residency hook
//                 (Notes [Saved value lifetime], [Recompute], [Replays in place])
//   recording.h   the recording context: tagger, observers, block, region
//                 (Note [Graph events])
//   eviction.h    the pool that keeps outputs resident under a budget
//   backward.h    the backward executor
// Ops include this header and get what they use of them.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "engine/recompute.h"
#include "engine/record.h"
#include "engine/recording.h"
#include "engine/sequence.h"
#include "engine/tensor.h"

namespace remat {

// Where the gradient of one input goes: the node that made the input (or the
// accumulator of a leaf), or nowhere when the input needs no gradient.
struct Edge {
  std::shared_ptr<Node> node;
};

class Node {
 public:
  virtual ~Node();

  virtual std::string_view name() const = 0;
  // The op itself: output from inputs, no autograd. Must be repeatable.
  virtual Tensor forward(const Tensors& inputs) = 0;
  // Keeps what backward reads, through save_value(). Default: nothing.
  virtual void save(const Tensors& inputs, const Tensor& output) {}
  // One gradient per input, in input order; an undefined tensor where
  // needs_input_grad(i) is false or the gradient is zero by construction.
  virtual Tensors backward(const Tensor& grad_output) = 0;
  // What this op is (OpTraits), read once its forward has run (the shapes
  // are in record()). Default: a memory-bound op of no FLOPs that replays
  // into a new output.
  virtual OpTraits traits() const { return {}; }

  bool needs_input_grad(size_t i) const { return i < edges_.size() && edges_[i].node != nullptr; }
  const std::vector<Edge>& next_edges() const { return edges_; }
  const NodeRecord& record() const { return *record_; }
  // The record, shared: a planner may keep it after the node is gone, and
  // the node's observer writes what it measured into it.
  const std::shared_ptr<NodeRecord>& shared_record() const { return record_; }
  // The observers of the recording context the node was recorded in (Note
  // [Graph events]); none for a node recorded under none.
  const GraphObservers& observers() const;
  // Calls event(observer) for each of them.
  template <class Event>
  void notify(const Event& event) const {
    if (observers_) {
      for (const std::shared_ptr<GraphObserver>& observer : *observers_) event(*observer);
    }
  }
  // Frees every saved value (after this node's backward has run).
  void release_saved();

  // Note [Recompute]. The tag is set when the node is recorded.
  Tag tag() const { return record_->tag; }
  // This node's output, replayed from its inputs if no rebuilt copy exists.
  Tensor rebuild();
  // Materialises every saved value now (rebuilding dropped ones), so that
  // backward() itself allocates only what it computes.
  void materialize_saved() const;
  // Called when the caller's last handle on the output goes (see
  // NodeRecord::output_released_before).
  void output_released();

  // Turns a Recompute node into a Keep one while its output is still alive
  // (a checkpoint boundary: a block's output, found when the next block
  // reads it): saved values made from now on hold `output`, and those made
  // before read it too, so it is never replayed.
  void promote_to_keep(const Tensor& output);

  // Note [Eviction]. While pinned (a count), the resident output is never
  // evicted; the backward executor pins the producers of a node's saved
  // values while its backward runs (SavedValuePins).
  void pin() { ++pins_; }
  void unpin() { --pins_; }
  bool pinned() const { return pins_ > 0; }
  // The output was evicted and not rebuilt since.
  bool evicted() const { return evicted_; }
  // The residency hook holding the output resident, or null.
  const Residency* residency() const { return residency_.get(); }
  // The resident output (undefined when evicted, or held by no hook), and
  // its eviction: the copy goes, to be rebuilt on demand. For the hook.
  const Tensor& resident_output() const { return rebuilt_; }
  void evict();

 protected:
  NodeRecord& mutable_record() { return *record_; }
  // forward()'s output buffer: during a replay, input overwritable_input
  // itself when it came from a node of the graph, the replay holds the only
  // reference to its storage, and the shape and dtype match (the liveness
  // simulator's rule); otherwise a new tensor.
  Tensor new_output(const Tensors& inputs, const Shape& shape, DType dtype) const;
  void save_value(const Tensor& value);
  // True while rebuild() runs forward(): a replay, whose saved values (side
  // results included) are still there to read.
  bool replaying() const { return replaying_; }
  // A replay (rebuild()) ran forward() again: drop what forward() left in
  // members for save() (a side result is saved once, at record time).
  virtual void discard_side_results() {}
  // The i-th value given to save_value(), materialised.
  Tensor saved(size_t i) const { return saved_.at(i).materialize(name()); }
  // backward() has read saved value i for the last time: free it now,
  // before allocating the rest of its results (a linear layer's input goes
  // once dW is computed, before dx is allocated). Once per backward; a
  // no-op while a backward retains the graph (retaining_graph()).
  void release_saved_now(size_t i);

 private:
  friend Tensor apply_op(std::shared_ptr<Node> node, const Tensors& inputs);  // engine/autograd.h
  friend struct Recorder;  // apply_op's steps (autograd.cpp)
  friend class SavedValue;
  friend class SavedValuePins;
  void add_use() { ++pending_uses_; }
  void drop_use();
  // apply_op, once the node is recorded: keep the replay inputs of a
  // Recompute node; run save() classifying what it saves; hold the output
  // resident under `residency` (null: nothing to do).
  void keep_replay_inputs(const Tensors& inputs);
  void record_saved(const Tensors& inputs, const Tensor& output);
  void keep_resident(const std::shared_ptr<Residency>& residency, const Tensors& inputs, const Tensor& output);

  std::vector<Edge> edges_;
  std::vector<SavedValue> saved_;
  std::shared_ptr<NodeRecord> record_ = std::make_shared<NodeRecord>();
  std::shared_ptr<const GraphObservers> observers_;
  const Tensors* recording_inputs_ = nullptr;  // while save() runs, to classify saved values
  const Tensor* recording_output_ = nullptr;
  std::vector<SavedValue> replay_inputs_;  // Recompute nodes only
  Tensor rebuilt_;                         // the replayed output, while a SavedValue still needs it
  int pending_uses_ = 0;                   // SavedValues that read this node's output
  bool replaying_ = false;                 // rebuild() is running forward()
  bool replay_failed_ = false;             // a replay threw after letting go of its inputs
  // Note [Eviction]: the hook holding the output resident (null: none),
  // pins, and whether it was evicted.
  std::shared_ptr<Residency> residency_;
  int pins_ = 0;
  bool evicted_ = false;
};

// True when nothing but `t` refers to its storage and `t` covers all of it,
// densely: backward may then write its result over a gradient it was given
// (an elementwise op's dx over dout), and the engine may adopt a gradient
// as a leaf's .grad without a copy.
bool owns_storage_alone(const Tensor& t);


// Runs node->forward(inputs); if grad mode is on and an input requires grad,
// records the node (edges, saved values, shapes, its tag from the recording
// context) as the output's grad_fn.
Tensor apply_op(std::shared_ptr<Node> node, const Tensors& inputs);

// The edge a gradient for `t` should flow into (null if t needs none).
Edge gradient_edge(const Tensor& t);

// Grad mode, per thread: not part of the recording context, since it says
// whether there is a recording at all (backward and replays run without).
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Whether the backward running on this thread keeps saved values for another
// (run_backward with retain_graph). RetainGraphScope sets it.
bool retaining_graph();
class RetainGraphScope {
 public:
  explicit RetainGraphScope(bool retain);
  ~RetainGraphScope();
  RetainGraphScope(const RetainGraphScope&) = delete;
  RetainGraphScope& operator=(const RetainGraphScope&) = delete;

 private:
  bool previous_;
};

}  // namespace remat
