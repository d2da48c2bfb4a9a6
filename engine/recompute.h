// What becomes of a node's output and of what its backward reads: saved
// values (read through materialize() and nothing else, so that the engine
// can drop a value and rebuild it), the replay that rebuilds a dropped one,
// and the residency hook a pool of resident outputs implements (Note
// [Eviction], engine/eviction.h). The liveness simulator
// (scheduler/simulate.cpp) follows the same rules. The code is in
// recompute.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/tensor.h"

namespace remat {

// Note [Saved value lifetime]
// A SavedValue holds a tensor that backward will read: an input of the node
// or its output. It holds the data only (no grad_fn), so a node that saves
// its own output makes no reference cycle. Backward frees each node's saved
// values right after the node's backward has run (unless retain_graph), so
// activation bytes fall during backward as the graph is consumed. A released
// value cannot be read again: a second backward through the same graph is an
// error, as in PyTorch. A value whose storage was written in place after it
// was saved (an optimizer step between forward and backward) is an error
// too, never a silently wrong gradient: the storage's version is recorded.
// A value made by a Recompute node holds that node instead of the bytes
// (Note [Recompute]).
class Node;

class SavedValue {
 public:
  SavedValue() = default;
  explicit SavedValue(const Tensor& value);
  SavedValue(SavedValue&& other) noexcept;
  SavedValue& operator=(SavedValue&& other) noexcept;
  SavedValue(const SavedValue&) = delete;
  SavedValue& operator=(const SavedValue&) = delete;
  ~SavedValue();

  // The saved tensor, ready for backward to read (rebuilt if it was dropped).
  Tensor materialize(std::string_view op) const;
  void release();
  bool is_released() const { return released_; }
  // False for a placeholder (an undefined tensor saved to keep indices).
  bool holds_value() const { return holds_value_; }
  // True when the value is rebuilt on demand rather than held.
  bool is_dropped() const { return !producer_.expired() || recompute_; }
  // The Recompute node that rebuilds it (null for a value held directly).
  std::shared_ptr<Node> producer() const { return producer_.lock(); }

 private:
  Tensor value_;
  std::weak_ptr<Node> producer_;  // set instead of value_ for a Recompute producer
  bool recompute_ = false;
  uint64_t version_ = 0;
  bool released_ = false;
  bool holds_value_ = false;
};


// Note [Recompute]
// A node tagged Tag::Recompute does not let its output outlive forward: a
// SavedValue of that output (in a consumer, or the node's own) holds the
// producing node instead of the bytes, so the output is freed as soon as
// forward's own references to it go. materialize() then asks the producer
// to rebuild() it: the producer replays its forward() on its materialised
// inputs (recursively rebuilding dropped ones) under no-grad, and keeps the
// rebuilt value until the last SavedValue that reads it has been released.
// A replay is the same computation on the same values (dropout redraws the
// same mask from its recorded seed and offset), so gradients are
// bit-identical to those of a run that kept everything.
//
// Under a residency hook (below; Note [Eviction], engine/eviction.h) a node is
// tagged Recompute and still keeps its output resident after forward; the
// hook's pool may evict it under its budget, and rebuild() replays it again
// as often as it is evicted (its replay inputs stay until its own backward).
//
// Note [Replays in place]
// A replay lets go of its replay inputs before it runs forward(), holding
// them only in its own argument list. An elementwise op (see
// OpTraits::overwritable_input) then writes its output over an input that
// nothing else refers to any more: a link of a dropped chain that only the
// next link reads, such as attention's scores on the way to softmax. The
// replay allocates nothing and writes to memory it has just read, instead
// of to a cold new block. Forward never does this (its caller holds every
// input), and the liveness simulator applies the same rule: both call
// replay_writes_over_input.

// The rule of Note [Replays in place], one function for the engine
// (Node::new_output) and the liveness simulator (scheduler/simulate.cpp): a
// replay writes its output over input `input` when that is the op's
// overwritable input (OpTraits), the input came from a node of the graph,
// nothing but the replay's argument list holds its storage, which it covers
// densely, and it has the output's shape and dtype.
inline bool replay_writes_over_input(int overwritable_input, size_t input, bool from_graph, bool held_alone_and_dense,
                                     bool same_shape_and_dtype) {
  return overwritable_input >= 0 && static_cast<size_t>(overwritable_input) == input && from_graph &&
         held_alone_and_dense && same_shape_and_dtype;
}

// The residency hook: how a node whose output stays resident after forward
// (Note [Eviction]) tells the pool that holds it what happens to that
// output. The engine calls it and knows no more of eviction; ResidentPool
// implements it. A recording context with a hook
// (RecordingContext::residency) tags every node Recompute and admits it.
class Residency {
 public:
  virtual ~Residency() = default;
  // `node` was recorded and holds its output resident (its rebuilt copy).
  virtual void admit(Node& node) = 0;
  // Its resident output was read: as an input of a node being recorded, or
  // materialised for a backward.
  virtual void touch(Node& node) = 0;
  // rebuild() made its output resident again.
  virtual void rebuilt(Node& node) = 0;
  // No saved value reads the output any more: its copy went, not evicted.
  virtual void dropped(Node& node) = 0;
  // The node leaves the pool: its backward ran, it was promoted to Keep, or
  // it is destroyed. Called at most once per admit.
  virtual void leave(Node& node) = 0;
};

// Pins the producers of `node`'s saved values that are resident while it
// lives (the backward executor, around the node's backward), so that no
// value the backward reads is evicted between its materialisation and its
// last read (Node::pin).
class SavedValuePins {
 public:
  explicit SavedValuePins(const Node& node);
  ~SavedValuePins();
  SavedValuePins(const SavedValuePins&) = delete;
  SavedValuePins& operator=(const SavedValuePins&) = delete;

 private:
  std::vector<std::shared_ptr<Node>> pinned_;
};

}  // namespace remat
