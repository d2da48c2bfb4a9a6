// Recompute policies; see policies.h.
#include "scheduler/policies.h"

#include <fmt/format.h>

namespace remat::scheduler {
namespace {

bool same_block(const Node& a, const Node& b) {
  const auto& x = a.record().block;
  const auto& y = b.record().block;
  return x && y && *x == *y;
}

}  // namespace

RecomputePolicy keep_all() { return {}; }

RecomputePolicy per_block() {
  return {
      .tag = [](const Node& node) { return node.record().block ? Tag::Recompute : Tag::Keep; },
      // Read from outside its block: the block's output, a checkpoint.
      .keep_input = [](const Node& consumer, const Node& producer) { return !same_block(consumer, producer); },
  };
}

bool is_compute_bound(std::string_view op) { return op == "matmul" || op == "linear" || op == "affine"; }

RecomputePolicy compute_bound_kept() {
  return {.tag = [](const Node& node) { return is_compute_bound(node.name()) ? Tag::Keep : Tag::Recompute; }};
}

std::vector<std::string> policy_names() { return {"none", "blocks", "cost"}; }

RecomputePolicy policy_by_name(const std::string& name) {
  if (name == "none") return keep_all();
  if (name == "blocks") return per_block();
  if (name == "cost") return compute_bound_kept();
  REMAT_FAIL("unknown recompute policy '{}' (available: {})", name, fmt::join(policy_names(), ", "));
}

std::string reason_for(const std::string& name, const Node& node) {
  if (name == "none") return "policy none keeps every output";
  if (name == "cost") {
    return node.tag() == Tag::Keep ? "compute-bound (GEMM): expensive to rebuild per byte, kept"
                                   : "memory-bound: cheap to rebuild per byte, replayed in backward";
  }
  const auto& block = node.record().block;
  if (!block) return "outside any block: kept";
  if (node.tag() == Tag::Keep) return fmt::format("output of block {}, read after it: kept (a checkpoint)", *block);
  return fmt::format("inside block {}: replayed in backward", *block);
}

}  // namespace remat::scheduler
