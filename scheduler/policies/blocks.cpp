// Policy `blocks`: every node inside a block (nn's BlockScope, as
// gradient_checkpointing_enable marks a transformer's layers) is replayed,
// and what is read outside its block is kept: each block is replayed from
// its input, as torch.utils.checkpoint per block does.
#include <algorithm>

#include "scheduler/policies/policy.h"

namespace remat::scheduler::policies {

std::vector<Tag> blocks_tags(const search::Context& c) { return some_blocks_tags(c, {}); }

std::vector<Tag> some_blocks_tags(const search::Context& c, const std::vector<std::string>& replayed) {
  std::vector<Tag> tags(c.graph.size(), Tag::Keep);
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    const std::string& block = c.graph.nodes[v].block;
    if (block.empty() || v == c.root()) continue;
    if (!replayed.empty() && std::find(replayed.begin(), replayed.end(), block) == replayed.end()) continue;
    const bool read_outside = std::any_of(c.consumers[v].begin(), c.consumers[v].end(),
                                          [&](int64_t u) { return c.graph.nodes[u].block != block; });
    tags[v] = read_outside ? Tag::Keep : Tag::Recompute;
  }
  tags = c.with_forced(tags);
  search::settle_unread(c, tags);
  return tags;
}

Answer plan_blocks(const Request& request) {
  return {.tags = blocks_tags(request.c), .detail = "each block replayed from its input", .chosen_by = "blocks"};
}

}  // namespace remat::scheduler::policies
