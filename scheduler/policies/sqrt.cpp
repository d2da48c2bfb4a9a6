// Policy `sqrt` (Chen et al., "Training Deep Nets with Sublinear Memory
// Cost", 2016): walk the graph adding up the bytes backward reads, and keep
// a cut each time total / sqrt(#cuts) bytes have gone by since the last
// (about sqrt(#cuts) segments); replay everything else.
#include <algorithm>
#include <cmath>

#include "scheduler/policies/policy.h"

namespace remat::scheduler::policies {

std::vector<Tag> sqrt_tags(const search::Context& c) {
  int64_t total = 0;
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if (c.read[v]) total += c.graph.nodes[v].output_bytes;
  }
  const std::vector<int64_t> joints = search::cuts(c);
  const double segments = std::max(1.0, std::sqrt(static_cast<double>(joints.size())));
  const double segment_bytes = static_cast<double>(total) / segments;
  std::vector<Tag> tags = search::all(c, Tag::Recompute);
  double since = 0;
  size_t j = 0;
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if (c.read[v]) since += static_cast<double>(c.graph.nodes[v].output_bytes);
    if (j < joints.size() && joints[j] == v) {
      ++j;
      if (since >= segment_bytes) {
        if (c.decidable(v)) tags[v] = Tag::Keep;
        since = 0;
      }
    }
  }
  search::settle_unread(c, tags);
  return tags;
}

Answer plan_sqrt(const Request& request) {
  return {.tags = sqrt_tags(request.c), .detail = "a cut kept every ~sqrt", .chosen_by = "sqrt"};
}

}  // namespace remat::scheduler::policies
