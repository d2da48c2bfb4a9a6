// Policy `custom`: the caller's own rule (PlanOptions::custom), for
// researchers who prototype a policy, in C++ or in Python. The rule gives
// one tag per node from the profile; user rules (must_keep,
// must_recompute) still bind, views follow their base, and with a budget
// the simulator checks the plan: one that does not fit gives way to the
// least-memory search's fastest plan, as any policy's, and says so.
#include <fmt/format.h>

#include "scheduler/policies/policy.h"

namespace remat::scheduler::policies {

Answer plan_custom(const Request& request) {
  const search::Context& c = request.c;
  REMAT_CHECK(request.custom && *request.custom, "plan: policy custom needs the caller's rule (PlanOptions::custom, "
              "or a callable from Python)");
  std::vector<Tag> tags = (*request.custom)(c.graph);
  REMAT_CHECK(static_cast<int64_t>(tags.size()) == c.graph.size(), "plan: the custom rule gave {} tags for a graph of "
              "{} nodes (one per node, in position order)", tags.size(), c.graph.size());
  tags = c.with_forced(std::move(tags));
  if (request.budget) {
    const Simulation sim = c.simulate(tags);
    if (sim.peak_bytes > request.target) {
      Answer answer = fall_back(request, "custom");
      answer.detail = fmt::format("the custom rule's plan peaks at {} bytes, above the {} the budget leaves; {}",
                                  sim.peak_bytes, request.target, answer.detail);
      return answer;
    }
  }
  return {.tags = std::move(tags), .detail = "custom: the caller's rule", .chosen_by = "custom"};
}

}  // namespace remat::scheduler::policies
