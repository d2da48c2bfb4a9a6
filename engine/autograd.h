// Autograd records: Node, Edge, SavedValue, grad mode, and apply_op(), which
// runs an op's forward and records its node when a gradient is needed.
//
// An op is a Node subclass (see ops/): forward() computes the output from
// the inputs and nothing else, so that the engine can replay it; save()
// keeps what backward() will read, as SavedValues; backward() maps the
// gradient of the output to one gradient per input. Every node has one
// output. Reading a saved value goes through SavedValue::materialize() and
// nothing else, so that the engine can drop a value and rebuild it (see
// Note [Saved value lifetime]).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/allocator.h"
#include "engine/observer.h"
#include "engine/sequence.h"
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
//
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
// Under a ResidentPool (Note [Eviction], engine/eviction.h) a node is
// tagged Recompute and still keeps its output resident after forward; the
// pool may evict it under its budget, and rebuild() replays it again as
// often as it is evicted (its replay inputs stay until its own backward).
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
class Node;
class ResidentPool;

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

class Node;

// Where the gradient of one input goes: the node that made the input (or the
// accumulator of a leaf), or nowhere when the input needs no gradient.
struct Edge {
  std::shared_ptr<Node> node;
};

enum class Tag { Keep, Recompute };

// Where an input of a recorded node came from (the scheduler rebuilds the
// graph from these, after the nodes themselves may be gone).
struct InputSource {
  static constexpr uint64_t kNone = UINT64_MAX;
  uint64_t producer = kNone;   // sequence_nr of the node that made it, if any
  const void* leaf = nullptr;  // the leaf whose gradient it feeds, if any
  // An input no node made, held in activation bytes (Note [Inputs from
  // outside the graph]); null otherwise.
  std::shared_ptr<const OutsideInput> outside;
};

// Note [Inputs from outside the graph]
// An input that no recorded node made is the caller's: the batch, a
// parameter, or a constant made between two nodes (the rank-0 tensor of
// mul(h, 0.5), mean's divisor). Held in activation bytes, it counts in
// the step's peak like any value of the graph, and it lives while the
// caller's handle, a saved value or the replay inputs of a Recompute node
// hold it. So its node records an OutsideInput, shared by every node that
// reads the same handle: its storage's bytes, when that storage was
// allocated, and when the caller's handle went, both as the sequence_nr
// of the node recorded next. The liveness simulator counts an input
// allocated after the step began (a Checkpointer's record(), which takes a
// mark_sequence()); one allocated before belongs to the level the step
// starts from, as the batch does. Without a Checkpointer (profile_graph)
// the step begins at the first node, so a constant made for the first node
// itself goes unseen. What else the simulator gets wrong, none of which
// the ops or models here do:
// - a constant whose caller keeps it but passes in only a view of it is
//   freed, as predicted, when the last view passed in goes: the peak is
//   under-predicted by its bytes while the caller holds it;
// - within one gap between nodes, handles are assumed to go before new
//   constants are made (`h = g(h, 0.5)` does that);
// - a value of the graph passed back in detached (x.detach()) is counted
//   twice (over-predicted).
// Budgets keep a margin for these (scheduler/search.cpp). Recording is
// single-threaded, as for grad_accumulator.
struct OutsideInput {
  const void* storage = nullptr;  // identity only, never read (see scheduler/profile.cpp)
  int64_t bytes = 0;
  uint64_t made_before = 0;  // Storage::made_before()
  uint64_t released_before = InputSource::kNone;  // kNone: the handle is still held
  // Called when the handle goes (TensorImpl's destructor).
  void caller_released();
};

// What one saved value of a node is: input i (>= 0), the node's output, or a
// side result of its forward holding bytes of its own (layer_norm's mean).
inline constexpr int kSavedOutput = -1;
inline constexpr int kSavedSideResult = -2;
// NodeMeasures::grad_bytes for an input whose gradient is undefined, or is a
// view of the node's incoming gradient (no bytes of its own).
inline constexpr int64_t kNoGradient = -1;
inline constexpr int64_t kGradientAliasesOutput = -2;

// What a node is, as recorded at forward time: its op, shapes, bytes and
// traits, what it saves and how it was tagged. The scheduler's profile rows
// (NodeProfile) are these facts and the NodeMeasures, copied whole.
struct NodeFacts {
  std::string op;
  std::vector<Shape> input_shapes;
  std::vector<DType> input_dtypes;
  Shape output_shape;
  DType output_dtype = DType::Float32;
  uint64_t sequence_nr = 0;  // recording order; later nodes run first in backward
  // Bytes of storage the forward allocated for the output (0 for a view of
  // input `view_of`: views cost no storage).
  int64_t output_bytes = 0;
  int view_of = -1;
  // The output is contiguous over the whole of its storage (a fresh
  // output, or a view such as a reshape of one), and the node's
  // OpTraits::overwritable_input: the liveness simulator's in-place rule.
  bool output_dense = false;
  int overwritable_input = -1;
  // OpTraits::replay_reuses_side_results: a replay allocates no side results.
  bool replay_reuses_side_results = false;
  bool compute_bound = false;  // OpTraits::compute_bound: `cost` never replays it
  int64_t flops = 0;
  int64_t replay_flops = 0;  // OpTraits::replay_flops, or flops
  // The saved values (kSavedOutput, kSavedSideResult or an input index) and
  // the bytes of the side results.
  std::vector<int> saved;
  int64_t side_bytes = 0;
  Tag tag = Tag::Keep;  // mirrors Node::tag()
  // The checkpoint region (CheckpointRegion) the node was recorded in, or 0.
  uint64_t region = 0;
};

// What a GraphObserver measured of one node (Note [Graph events]): the
// scheduler's Profiler fills it; a node recorded under no observer keeps
// these zeros (observed false). Times are wall times less first touches on
// the CPU, and CUDA events' times on a GPU (scheduler/profiler.h).
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

// Per-node record: the facts, where each input came from, when the
// caller let go of the output, and what an observer measured; everything
// the scheduler's profile and liveness simulator read. Shared, so that a
// planner can hold the records of a step's graph without holding its nodes
// (and their saved activations).
struct NodeRecord : NodeFacts {
  std::vector<InputSource> inputs;
  // The innermost BlockScope open when the node was recorded (e.g.
  // "transformer.h.3"), or null: how module boundaries reach the scheduler.
  std::shared_ptr<const std::string> block;
  // The caller's last handle on the output went before the node with this
  // sequence_nr was recorded (kNone: still held when the graph ended).
  uint64_t output_released_before = InputSource::kNone;
  NodeMeasures measured;
};

// What an op is, declared by the op as data beside its forward and backward
// (CONTRIBUTING.md, "How the code reads"); apply_op copies it into the
// NodeRecord, from where the profile and the planners read it.
struct OpTraits {
  // Compute-bound (a GEMM: its arithmetic sets its time, and its output is
  // dear per byte to rebuild) or memory-bound (elementwise ops, norms,
  // softmax: the bytes they move). `cost` never replays a compute-bound op.
  bool compute_bound = false;
  // Floating-point operations of one forward call (2 per multiply-add), and
  // of one replay where it does less (a layer norm's reuses its
  // statistics); -1: as forward.
  int64_t flops = 0;
  int64_t replay_flops = -1;
  // The input a replay may write the output over (Note [Replays in place]),
  // or -1. An op naming i never reads an element of input i after it has
  // written that element of the output (elementwise ops; softmax reads a
  // row whole before writing it), and allocates nothing in forward() but
  // the output (new_output()).
  int overwritable_input = -1;
  // A replay reads its side results back from its saved values
  // (replaying()) instead of making them again: it allocates its output
  // only (layer_norm's mean and rstd). The liveness simulator's rule: an op
  // whose forward() takes that path when replaying() must say so, or
  // predicted peaks count side results its replays never allocate.
  bool replay_reuses_side_results = false;
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
  // The observer current when the node was recorded, or null (Note [Graph
  // events]).
  GraphObserver* observer() const { return observer_.get(); }
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
  // values while its backward runs.
  void pin() { ++pins_; }
  void unpin() { --pins_; }
  // The output was evicted by its ResidentPool and not rebuilt since.
  bool evicted() const { return evicted_; }
  // The ResidentPool this node's output is resident in, or null.
  const ResidentPool* resident_pool() const { return pool_.get(); }

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
  friend Tensor apply_op(std::shared_ptr<Node> node, const Tensors& inputs);
  friend class SavedValue;
  friend class ResidentPool;
  friend class SavedValuePins;
  void add_use() { ++pending_uses_; }
  void drop_use();

  std::vector<Edge> edges_;
  std::vector<SavedValue> saved_;
  std::shared_ptr<NodeRecord> record_ = std::make_shared<NodeRecord>();
  std::shared_ptr<GraphObserver> observer_;
  const Tensors* recording_inputs_ = nullptr;  // while save() runs, to classify saved values
  const Tensor* recording_output_ = nullptr;
  std::vector<SavedValue> replay_inputs_;  // Recompute nodes only
  Tensor rebuilt_;                         // the replayed output, while a SavedValue still needs it
  int pending_uses_ = 0;                   // SavedValues that read this node's output
  bool replaying_ = false;                 // rebuild() is running forward()
  bool replay_failed_ = false;             // a replay threw after letting go of its inputs
  // Note [Eviction]: the pool holding the output resident (null: none), the
  // pool's clock at its last access, pins, and whether it was evicted.
  std::shared_ptr<ResidentPool> pool_;
  uint64_t last_access_ = 0;
  int pins_ = 0;
  bool evicted_ = false;
  bool in_pool_ = false;
};

// Note [Eviction]: pins the producers of `node`'s saved values that are
// resident in a pool while it lives (the backward executor, around the
// node's backward), so that no value the backward reads is evicted between
// its materialisation and its last read.
class SavedValuePins {
 public:
  explicit SavedValuePins(const Node& node);
  ~SavedValuePins();
  SavedValuePins(const SavedValuePins&) = delete;
  SavedValuePins& operator=(const SavedValuePins&) = delete;

 private:
  std::vector<std::shared_ptr<Node>> pinned_;
};

// True when nothing but `t` refers to its storage and `t` covers all of it,
// densely: backward may then write its result over a gradient it was given
// (an elementwise op's dx over dout), and the engine may adopt a gradient
// as a leaf's .grad without a copy.
bool owns_storage_alone(const Tensor& t);

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

// Chooses the tag of each node as it is recorded (a policy of scheduler/
// installs one with RecomputeScope). It is asked for every node, in
// recording order; views of a dropped value are dropped whatever it says:
// they hold no bytes of their own.
using TagPolicy = std::function<Tag(const Node& node)>;
// Asked, as `consumer` is recorded, for each input made by a Recompute node
// `producer`: true promotes the producer to Keep (Node::promote_to_keep).
using KeepInputPolicy = std::function<bool(const Node& consumer, const Node& producer)>;

struct RecomputePolicy {
  TagPolicy tag;
  KeepInputPolicy keep_input;  // may be empty
  // Note [Eviction]: every node is tagged Recompute, whatever `tag` says,
  // and its output stays resident in this pool until evicted.
  std::shared_ptr<ResidentPool> pool;
};

class RecomputeScope {
 public:
  explicit RecomputeScope(TagPolicy policy) : RecomputeScope(RecomputePolicy{std::move(policy), {}}) {}
  explicit RecomputeScope(RecomputePolicy policy);
  ~RecomputeScope();
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  RecomputePolicy previous_;
};

// Runs node->forward(inputs); if grad mode is on and an input requires grad,
// records the node (edges, saved values, shapes) as the output's grad_fn.
Tensor apply_op(std::shared_ptr<Node> node, const Tensors& inputs);

// The edge a gradient for `t` should flow into (null if t needs none).
Edge gradient_edge(const Tensor& t);

bool grad_enabled();

// Marks every node recorded while it lives as part of block `name` (a
// transformer block, say); scopes nest, the innermost wins. Modules open one
// around a block's forward; the scheduler reads NodeRecord::block.
class BlockScope {
 public:
  explicit BlockScope(std::string name);
  ~BlockScope();
  BlockScope(const BlockScope&) = delete;
  BlockScope& operator=(const BlockScope&) = delete;

 private:
  std::shared_ptr<const std::string> previous_;
};

// A checkpoint region, as torch.utils.checkpoint: every node recorded while
// it lives is replayed in backward (whatever the policy), except the
// region's outputs, which are kept once a node outside the region reads
// them. scheduler::checkpoint(fn, inputs) opens one around fn.
class CheckpointRegion {
 public:
  CheckpointRegion();
  ~CheckpointRegion();
  CheckpointRegion(const CheckpointRegion&) = delete;
  CheckpointRegion& operator=(const CheckpointRegion&) = delete;

 private:
  uint64_t previous_;
};

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace remat
