// Policy dtr; see dtr.h. The heuristic is DTR's h_DTR with the exact e*:
// the cost of a value counts every evicted ancestor its rebuild would have
// to replay first, found by walking the graph's edges from it through
// evicted producers (the paper approximates that set with union-find; the
// graphs here are small enough to walk).
#include "scheduler/policies/dtr.h"

#include <limits>
#include <unordered_set>

#include "scheduler/search.h"

namespace remat::scheduler {
namespace {

int64_t bytes_moved(const NodeRecord& record) {
  int64_t moved = numel(record.output_shape) * static_cast<int64_t>(dtype_size(record.output_dtype));
  for (size_t i = 0; i < record.input_shapes.size(); ++i) {
    moved += numel(record.input_shapes[i]) * static_cast<int64_t>(dtype_size(record.input_dtypes[i]));
  }
  return moved;
}

}  // namespace

double DtrPolicy::replay_ms(const Node& node) const {
  const NodeRecord& record = node.record();
  if (options_.measured_costs) {
    const NodeMeasures measured = options_.measured_costs->measured(record);
    if (measured.observed && measured.forward_ms > 0) return measured.forward_ms;
  }
  return search::roofline_ms(record.replay_flops, bytes_moved(record));  // the nominal clock of search.cpp
}

double DtrPolicy::rebuild_cost_ms(const EvictionCandidate& candidate) const {
  double cost = 0;
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack;
  for (const Node* node : candidate.nodes) {
    cost += replay_ms(*node);
    seen.insert(node);
    stack.push_back(node);
  }
  while (options_.neighbourhood && !stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    for (const Edge& edge : node->next_edges()) {
      const Node* producer = edge.node.get();
      if (!producer || !producer->evicted() || !seen.insert(producer).second) continue;
      cost += replay_ms(*producer);
      stack.push_back(producer);
    }
  }
  return cost;
}

double DtrPolicy::score(const EvictionCandidate& candidate, const ResidentPool& pool) const {
  const double staleness = static_cast<double>(pool.now() - candidate.last_access) + 1.0;
  return rebuild_cost_ms(candidate) / (static_cast<double>(candidate.bytes) * staleness);
}

size_t DtrPolicy::choose(const std::vector<EvictionCandidate>& candidates, const ResidentPool& pool) {
  size_t best = 0;
  double best_score = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double h = score(candidates[i], pool);
    if (h < best_score) {
      best = i;
      best_score = h;
    }
  }
  return best;
}

std::shared_ptr<ResidentPool> make_dtr_pool(int64_t budget, Device device, DtrOptions options) {
  return std::make_shared<ResidentPool>(std::make_shared<DtrPolicy>(options), budget, device);
}

}  // namespace remat::scheduler
