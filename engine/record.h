// What a recorded node is, as data: the op's traits (OpTraits, declared by
// the op), the facts apply_op notes at forward time (NodeFacts), and where
// each input came from (InputSource, OutsideInput). A NodeRecord is shared,
// so that a planner can hold the records of a step's graph without holding
// its nodes (and their saved activations); with what the scheduler's
// Profiler measured, the profile rows and liveness simulator read nothing
// else of a node.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/dtype.h"
#include "engine/shape.h"

namespace remat {

enum class Tag { Keep, Recompute };

// What an op is, declared by the op as data beside its forward and backward
// (CONTRIBUTING.md, "How the code reads"). The record holds it whole
// (NodeFacts derives from it), so a new trait is a field here and its JSON
// in scheduler/profile_json.cpp, nothing else.
struct OpTraits {
  // Compute-bound (a GEMM: its arithmetic sets its time, and its output is
  // dear per byte to rebuild) or memory-bound (elementwise ops, norms,
  // softmax: the bytes they move). `cost` never replays a compute-bound op.
  bool compute_bound = false;
  // Floating-point operations of one forward call (2 per multiply-add), and
  // of one replay where it does less (a layer norm's reuses its
  // statistics); -1: as forward (a record always holds the count).
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

// What one saved value of a node is: input i (>= 0), the node's output, or a
// side result of its forward holding bytes of its own (layer_norm's mean).
inline constexpr int kSavedOutput = -1;
inline constexpr int kSavedSideResult = -2;

// What a node is, as recorded at forward time: its op's traits, shapes,
// bytes, what it saves and how it was tagged. The scheduler's profile rows
// (NodeProfile) are these facts and what the Profiler measured, copied whole.
struct NodeFacts : OpTraits {
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
  // output, or a view such as a reshape of one): with
  // OpTraits::overwritable_input, the liveness simulator's in-place rule.
  bool output_dense = false;
  // The saved values (kSavedOutput, kSavedSideResult or an input index) and
  // the bytes of the side results.
  std::vector<int> saved;
  int64_t side_bytes = 0;
  Tag tag = Tag::Keep;  // mirrors Node::tag()
  // The checkpoint region (CheckpointRegion) the node was recorded in, or 0.
  uint64_t region = 0;
};

struct OutsideInput;

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

// Per-node record: the facts, where each input came from, and when the
// caller let go of the output. What an observer measures of the node is
// the observer's (the scheduler's Profiler keeps it by sequence_nr).
struct NodeRecord : NodeFacts {
  std::vector<InputSource> inputs;
  // The block of the recording context when the node was recorded (e.g.
  // "transformer.h.3"), or null: how module boundaries reach the scheduler.
  std::shared_ptr<const std::string> block;
  // The path of the module whose forward recorded it (Note [Node names] in
  // engine/recording.h), or null outside every module.
  std::shared_ptr<const std::string> module;
  // The caller's last handle on the output went before the node with this
  // sequence_nr was recorded (kNone: still held when the graph ended).
  uint64_t output_released_before = InputSource::kNone;
};

}  // namespace remat
