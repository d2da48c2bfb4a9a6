// Recompute policies: the rules that tag each node Keep or Recompute as the
// graph is recorded (the mechanism is Note [Recompute] in engine/autograd.h).
// So far the rule-based ones; the cost model, budgets and the optimal plan
// will join them here.
//
//   RecomputeScope scope(scheduler::policy_by_name("blocks"));
//   Tensor loss = model.forward(ids, targets).loss;   // recorded under the policy
#pragma once

#include <string>
#include <vector>

#include "engine/autograd.h"

namespace remat::scheduler {

// Keep every output (what a plain autograd engine does).
RecomputePolicy keep_all();

// Gradient checkpointing per block, as gradient_checkpointing_enable does for
// transformers: every node inside a block (a BlockScope) is replayed in
// backward; a block's output, which the next block or the head reads, is
// kept; nodes outside blocks are kept.
RecomputePolicy per_block();

// The cost rule without a budget: keep what is expensive to recompute per
// byte (the GEMMs: matmul, linear, affine) and replay what is cheap (the
// memory-bound rest: elementwise ops, norms, activations, softmax, masks,
// embeddings). A replay rebuilds only what backward reads.
RecomputePolicy compute_bound_kept();

// "none", "blocks" or "cost"; another name is an error listing these.
RecomputePolicy policy_by_name(const std::string& name);
std::vector<std::string> policy_names();

// One line on why `node` got its tag under policy `name` (for remat explain).
std::string reason_for(const std::string& name, const Node& node);

}  // namespace remat::scheduler
