// profile_graph; see profile.h.
#include "scheduler/profile.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "engine/backward.h"

namespace remat::scheduler {
namespace {

// FNV-1a over the bytes of a value.
void mix(uint64_t& hash, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;
  }
}

}  // namespace

double NodeProfile::ms_per_mib() const {
  if (output_bytes == 0) return std::numeric_limits<double>::infinity();
  return forward_ms / (static_cast<double>(output_bytes) / (1024.0 * 1024.0));
}

int64_t GraphProfile::total_output_bytes() const {
  int64_t total = 0;
  for (const NodeProfile& n : nodes) total += n.output_bytes;
  return total;
}

double GraphProfile::total_forward_ms() const {
  double total = 0;
  for (const NodeProfile& n : nodes) total += n.forward_ms;
  return total;
}

GraphProfile profile_graph(const Tensor& root, const std::function<std::string(const Node&)>& explain) {
  REMAT_CHECK(root.defined() && root.grad_fn(), "profile_graph: tensor {} has no recorded graph", root.str());
  std::vector<Node*> nodes;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack{root.grad_fn().get()};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    if (!node || !seen.insert(node).second || dynamic_cast<AccumulateGrad*>(node)) continue;
    nodes.push_back(node);
    for (const Edge& edge : node->next_edges()) stack.push_back(edge.node.get());
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const Node* a, const Node* b) { return a->record().sequence_nr < b->record().sequence_nr; });

  GraphProfile profile;
  uint64_t hash = 14695981039346656037ull;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeRecord& r = nodes[i]->record();
    NodeProfile row{.position = static_cast<int64_t>(i),
                    .op = std::string(nodes[i]->name()),
                    .input_shapes = r.input_shapes,
                    .output_shape = r.output_shape,
                    .output_bytes = r.output_bytes,
                    .flops = nodes[i]->flops(),
                    .forward_ms = r.forward_ms,
                    .block = r.block ? *r.block : std::string(),
                    .tag = nodes[i]->tag(),
                    .reason = explain ? explain(*nodes[i]) : std::string()};
    mix(hash, row.op.data(), row.op.size());
    for (const Shape& s : row.input_shapes) mix(hash, s.data(), s.size() * sizeof(int64_t));
    mix(hash, row.output_shape.data(), row.output_shape.size() * sizeof(int64_t));
    profile.nodes.push_back(std::move(row));
  }
  profile.signature = hash;
  return profile;
}

}  // namespace remat::scheduler
