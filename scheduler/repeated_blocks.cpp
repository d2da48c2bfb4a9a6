// Repeated blocks: see repeated_blocks.h. Each block is reduced to a key of
// what its nodes are, edges relative to its first position; blocks of equal
// keys are twins of the first one.
#include "scheduler/repeated_blocks.h"

#include <map>
#include <tuple>
#include <utility>

namespace remat::scheduler {
namespace {

// A position relative to the block's first one; -1 stays -1 (no node).
int64_t relative(int64_t position, int64_t first) { return position < 0 ? position : position - first; }

// One node's part of its block's key. Everything that makes plans or their
// bytes, nothing that is only timed.
using NodeKey = std::tuple<std::string, std::vector<Shape>, std::vector<DType>, Shape, DType, int64_t, int, bool,
                           std::vector<int>, int64_t, int64_t, std::vector<int64_t>, std::vector<int64_t>,
                           std::vector<int64_t>, int64_t, int, int, bool, bool, int64_t, int64_t, int64_t>;

NodeKey key_of(const search::Context& c, int64_t v, int64_t first) {
  const NodeProfile& n = c.graph.nodes[v];
  std::vector<int64_t> inputs, outside;
  for (int64_t input : n.inputs) inputs.push_back(relative(input, first));
  for (int64_t index : n.outside) {
    outside.push_back(index < 0 ? -1 : c.graph.outside_inputs[index].bytes);
  }
  const int forced = c.forced[v] ? static_cast<int>(*c.forced[v]) : -1;
  return {n.op, n.input_shapes, n.input_dtypes, n.output_shape, n.output_dtype, n.output_bytes, n.view_of,
          n.output_dense, n.saved, n.side_bytes, n.flops, inputs, outside, n.grad_bytes,
          relative(n.released_at, first), n.released_early, forced, static_cast<bool>(c.read[v]),
          n.compute_bound, n.forward_peak_bytes, n.backward_peak_bytes, n.backward_late_peak_bytes};
}

}  // namespace

RepeatedBlocks repeated_blocks(const search::Context& c) {
  const GraphProfile& g = c.graph;
  RepeatedBlocks result;
  result.twin_of.assign(static_cast<size_t>(g.size()), -1);
  // The blocks as runs of consecutive positions; a name seen in two runs is
  // not a block that repeats (it is left alone).
  std::vector<std::pair<int64_t, int64_t>> runs;  // [first, last]
  std::map<std::string, int> runs_of_name;
  for (int64_t v = 0; v < g.size(); ++v) {
    const std::string& block = g.nodes[v].block;
    if (block.empty()) continue;
    if (v > 0 && g.nodes[v - 1].block == block) {
      runs.back().second = v;
      continue;
    }
    runs.push_back({v, v});
    ++runs_of_name[block];
  }
  std::map<std::vector<NodeKey>, int64_t> first_of;  // a block's key -> the first block's first position
  std::map<int64_t, bool> repeated;                  // a first block's first position -> some twin repeats it
  for (const auto& [first, last] : runs) {
    if (runs_of_name[g.nodes[first].block] != 1) continue;
    ++result.blocks;
    std::vector<NodeKey> key;
    for (int64_t v = first; v <= last; ++v) key.push_back(key_of(c, v, first));
    const auto [it, inserted] = first_of.emplace(std::move(key), first);
    if (inserted) continue;
    ++result.repeats;
    repeated[it->second] = true;
    for (int64_t v = first; v <= last; ++v) result.twin_of[v] = it->second + (v - first);
  }
  result.kinds = static_cast<int64_t>(repeated.size());
  return result;
}

}  // namespace remat::scheduler
