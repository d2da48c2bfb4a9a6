// The profile of a recorded graph: one row per node in recording order with
// what the planners and the liveness simulator read (op, shapes, bytes,
// FLOPs, measured times and peaks, which values backward reads, where each
// input came from), and the graph's signature (its ops and shapes), under
// which a plan is cached. It is built from the nodes' shared NodeRecords, so
// it can be taken after backward, once the nodes' saved values are gone.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "scheduler/measures.h"

namespace remat::scheduler {

// One row: the node's recorded facts and what the Profiler measured of it
// (NodeFacts, engine/record.h; NodeMeasures, scheduler/measures.h: a row is
// a value, so that a profile outlives its records, loads from JSON and
// takes medians over steps), and where it sits in the graph. Nodes of the same op, shapes and dtypes (a repeated
// layer) share their group's median times (steadier plans, see
// profile.cpp).
struct NodeProfile : NodeFacts, NodeMeasures {
  int64_t position = 0;  // 0, 1, ... in recording order
  // Where it was recorded in its step (the Checkpointer's recording on one
  // thread; nodes the root does not depend on count too): plans are applied
  // by this index.
  int64_t recorded_index = 0;
  // Per input: the position of the node that made it, or -1 when it came
  // from outside the graph (a parameter, the batch); and the index of the
  // leaf its gradient accumulates into, or -1.
  std::vector<int64_t> inputs;
  std::vector<int64_t> leaves;
  // Per input from outside the graph made during its forward: its index in
  // GraphProfile::outside_inputs; -1 for any other input.
  std::vector<int64_t> outside;
  // The caller dropped its handle on the output before this position was
  // recorded (the node count when it was still held as the graph ended).
  int64_t released_at = 0;
  std::string block;  // "" outside any block
  // Note [Node names] (engine/recording.h): the path of the module that
  // recorded it ("" outside every module) and the node's name,
  // "transformer.h.3.mlp.c_fc/affine", with "#k" for the k-th earlier node
  // of the same module and op (name_nodes).
  std::string module;
  std::string name;

  // Bytes of a dense tensor of the output's shape (a gradient of it).
  int64_t dense_output_bytes() const;
  // What a replay costs, in place or not: its timed replays of that kind,
  // else (in place) those into a new output, else its forward.
  double replay_cost_ms(bool in_place) const;
  // The replay cost a byte's price is drawn from: in place where a replay
  // was timed so.
  double priced_replay_ms() const { return replay_cost_ms(replay_in_place_ms > 0); }
  // The price of recomputing a byte: priced_replay_ms() per MiB of output;
  // infinite for views, which free nothing.
  double ms_per_mib() const;
};

// An input from outside the graph that its step allocated as activation
// bytes (a constant operand: engine/record.h, Note [Inputs from outside
// the graph]), one per storage.
struct OutsideInputProfile {
  int64_t bytes = 0;
  int64_t made_at = 0;  // allocated before the node at this position
  // The caller's handle went before this position (the node count when it
  // was still held as the graph ended).
  int64_t released_at = 0;
};

struct GraphProfile {
  std::vector<NodeProfile> nodes;  // the last one is the root (the loss)
  int64_t leaves = 0;
  std::vector<OutsideInputProfile> outside_inputs;
  uint64_t signature = 0;  // equal for graphs of the same ops and shapes
  // The wall time of the step the profile came from, as the Checkpointer
  // saw it (its recorded forward and the backward pass, bookkeeping and
  // gradient sums included, less that step's replays and first touches of
  // fresh memory), or 0 when unknown.
  double step_ms = 0;
  int64_t size() const { return static_cast<int64_t>(nodes.size()); }
  int64_t total_output_bytes() const;
  double total_forward_ms() const;
  double total_backward_ms() const;
  // step_ms where known, else the nodes' forward + backward; at most 1.5
  // times the latter (whatever else a forward does is not the graph's).
  double training_step_ms() const;
};

// Names every node from its module and op (NodeProfile::name), in
// position order; profile_graph, profile_records and load_profile call it.
void name_nodes(GraphProfile& graph);

// The signature of a graph of these rows: its ops, shapes, dtypes, edges
// and which nodes are in checkpoint regions (GraphProfile::signature).
uint64_t signature_of(const GraphProfile& graph);

// The median of `values` (the mean of the middle two for an even count):
// how repeated timings are summarised here and in train/. Error: no values.
double median(std::vector<double> values);

// A distribution-free interval for the median of independent draws: the
// order statistics of ranks k and n + 1 - k (1-based, sorted), with k the
// largest rank whose interval covers the median with probability at least
// `confidence` (tails of binomial(n, 1/2)); `coverage` is the probability
// it reaches. With too few values for `confidence` (n <= 5 at 0.95): the
// whole range, and its coverage. Errors: no values, confidence outside (0, 1).
struct MedianInterval {
  double low = 0, high = 0, coverage = 0;
};
MedianInterval median_interval(std::vector<double> values, double confidence = 0.95);

// The graph that produced `root` (leaf accumulators excluded).
GraphProfile profile_graph(const Tensor& root);

// The graph of records kept by a planner: the nodes the last record (the
// root) depends on, in recording order. `step_start`: the mark_sequence()
// taken as the step began (inputs from outside the graph allocated after
// it count, engine/record.h), else the step begins at its first node.
// Their measures are what `profiler` measured of them.
class Profiler;
GraphProfile profile_records(const std::vector<std::shared_ptr<const NodeRecord>>& records, const Profiler& profiler,
                             uint64_t step_start = InputSource::kNone);

}  // namespace remat::scheduler
