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

// "none" or "blocks"; another name is an error listing these.
RecomputePolicy policy_by_name(const std::string& name);
std::vector<std::string> policy_names();

// One line on why `node` got its tag under policy `name` (for remat explain).
std::string reason_for(const std::string& name, const Node& node);

}  // namespace remat::scheduler
