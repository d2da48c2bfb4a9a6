// The recording context: everything apply_op reads, besides its inputs,
// when it records a node. What tags the node (a Tagger), the pool that keeps
// outputs resident (a Residency hook, Note [Eviction]), the observers that
// listen (Note [Graph events]), and the block and checkpoint region the
// node is in. One context is installed on a thread at a time, by a scope
// object; each scope below installs a copy of the current context with one
// part changed, and puts the previous one back when it closes.
//
//   Checkpointer::record()  -> RecordingScope (its plan's tagger, its Profiler)
//   nn's GPT forward        -> BlockScope("transformer.h.3")
//   scheduler::checkpoint   -> CheckpointRegion
//   TraceRecorder           -> GraphObserverScope (the trace is one more observer)
//
// Note [Graph events]
// The engine records a graph and runs it; it measures nothing. Whoever
// observes a recording measures it: the scheduler's Profiler times each
// forward, replay and backward and watches the allocator around them, and
// keeps what it measured (scheduler/measures.h), which the profile and the
// liveness simulator read.
// A node keeps the observer that was current on its thread when it was
// recorded (the recording context's observers, engine/recording.h; a
// GraphObserverScope adds one), and every later event of that node goes
// there: its replays and its backward run after the scope has closed (a
// Checkpointer's step records its forward in a scope and runs backward
// outside it). A node recorded under no observer emits nothing. Several may
// listen (a Profiler and a TraceRecorder, say): each hears every event, in
// the order they were added.
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

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <vector>

#include "engine/device.h"
#include "engine/record.h"
#include "engine/recompute.h"
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

// The observers a node keeps, in the order they were added.
using GraphObservers = std::vector<std::shared_ptr<GraphObserver>>;

// Chooses the tag of each node as it is recorded (a policy of scheduler/;
// the Checkpointer is one). It is asked for every node, in recording order
// (so it can count positions); views of a dropped value are dropped
// whatever it says: they hold no bytes of their own.
class Tagger {
 public:
  virtual ~Tagger() = default;
  virtual Tag tag(const Node& node) = 0;
  // Asked, as `consumer` is recorded, for each input made by a Recompute
  // node `producer`: true promotes the producer to Keep
  // (Node::promote_to_keep). Default: never.
  virtual bool keep_input(const Node& consumer, const Node& producer) { return false; }
};

// A Tagger from a rule (a test's, the tour's, a Python callable's).
using TagPolicy = std::function<Tag(const Node& node)>;
class TagRule final : public Tagger {
 public:
  explicit TagRule(TagPolicy rule) : rule_(std::move(rule)) {}
  Tag tag(const Node& node) override { return rule_ ? rule_(node) : Tag::Keep; }

 private:
  TagPolicy rule_;
};

struct RecordingContext {
  Tagger* tagger = nullptr;  // null: every node kept; outlives the scope that installs it
  // Note [Eviction]: every node is tagged Recompute, whatever the tagger
  // says, and its output stays resident in this pool until evicted.
  std::shared_ptr<Residency> residency;
  // Note [Graph events]: every node recorded keeps these and tells them
  // what happens to it, whenever it happens; null: none.
  std::shared_ptr<const GraphObservers> observers;
  // The innermost block (BlockScope), or null; the checkpoint region
  // (CheckpointRegion), or 0.
  std::shared_ptr<const std::string> block;
  uint64_t region = 0;
  // The path of the innermost module whose forward is running (ModuleScope,
  // e.g. "transformer.h.3.mlp.c_fc"), or null: Note [Node names].
  std::shared_ptr<const std::string> module;
};

// The context installed on this thread (an empty one when none is).
const RecordingContext& recording_context();

// Installs `context` on this thread while it lives; scopes nest.
class RecordingScope {
 public:
  explicit RecordingScope(RecordingContext context);
  ~RecordingScope();
  RecordingScope(const RecordingScope&) = delete;
  RecordingScope& operator=(const RecordingScope&) = delete;
  const RecordingContext& context() const { return context_; }
  // Scopes open on this thread. Scopes close innermost first (C++ blocks
  // do); a binding whose scopes may close in any order (Python's manual
  // __exit__) compares this count with its own at entry, so that closing an
  // outer scope under an open inner one is an error, not a context freed
  // while still installed.
  static int open_on_this_thread();

 private:
  RecordingContext context_;
  const RecordingContext* previous_;
};

// The current context with the tagger and residency replaced: `tagger`
// (null: keep all) and no residency; or a rule; or (every node resident in
// `residency`) no tagger.
class RecomputeScope {
 public:
  RecomputeScope() : RecomputeScope(nullptr, nullptr) {}
  explicit RecomputeScope(Tagger* tagger, std::shared_ptr<Residency> residency = nullptr);
  explicit RecomputeScope(TagPolicy rule);
  explicit RecomputeScope(std::shared_ptr<Residency> residency) : RecomputeScope(nullptr, std::move(residency)) {}

 private:
  std::unique_ptr<TagRule> rule_;  // a rule's Tagger, before scope_ so it outlives it
  RecordingScope scope_;
};

// The current context with `observer` listening too (after those already
// listening); the observers of the current context while it lives.
class GraphObserverScope {
 public:
  explicit GraphObserverScope(std::shared_ptr<GraphObserver> observer);

 private:
  RecordingScope scope_;
};

// Marks every node recorded while it lives as part of block `name` (a
// transformer block, say); scopes nest, the innermost wins. Modules open one
// around a block's forward; the scheduler reads NodeRecord::block.
class BlockScope {
 public:
  explicit BlockScope(std::string name);

 private:
  RecordingScope scope_;
};

// Note [Node names]
// Every recorded node has a name that a user can read and write in a rule:
// the path of the module whose forward recorded it, a slash and its op,
// and "#k" for the k-th earlier node of the same module and op in the
// graph ("transformer.h.3.mlp.c_fc/affine", "transformer.h.3.attn/matmul#1",
// "/cross_entropy" for an op of the outermost forward). Modules open a
// ModuleScope with their path (nn::Module::name_scope, named like their
// parameters) at the start of forward(); the node keeps the innermost path
// (NodeRecord::module) and the scheduler's profile numbers the repeats
// (scheduler/profile.h, NodeProfile::name). Names depend on the model's
// code and the graph only, never on a run: the same on every run and
// machine, from C++ and from Python, so rules (scheduler/rules.h) and saved
// profiles can use them.
class ModuleScope {
 public:
  explicit ModuleScope(std::string path);

 private:
  RecordingScope scope_;
};

// A checkpoint region, as torch.utils.checkpoint: every node recorded while
// it lives is replayed in backward (whatever the tagger), except the
// region's outputs, which are kept once a node outside the region reads
// them. scheduler::checkpoint(fn, inputs) opens one around fn.
class CheckpointRegion {
 public:
  CheckpointRegion();

 private:
  RecordingScope scope_;
};

}  // namespace remat
