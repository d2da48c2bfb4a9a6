// Policy `auto`: the plans of cost, chain, blocks and sqrt and the graph's
// least-memory search in one pool; with a budget the fastest that fits,
// without one the least memory whose replays stay within 5% of the step.
// It names the policy whose plan won (Plan::chosen_by), so that a
// comparison of policies can tell its wins apart.
#include <iterator>

#include "scheduler/policies/policy.h"

namespace remat::scheduler::policies {

using search::Candidate;

std::vector<Candidate> pooled_plans(const search::Context& c) {
  std::vector<Candidate> pool = cost_plans(c);
  std::vector<Candidate> chain = chain_plans(c);
  pool.insert(pool.end(), std::make_move_iterator(chain.begin()), std::make_move_iterator(chain.end()));
  for (auto [name, rule] : {std::pair{"blocks", &blocks_tags}, std::pair{"sqrt", &sqrt_tags}}) {
    std::vector<Tag> tags = rule(c);
    pool.push_back({tags, c.simulate(tags), std::string(name) + ": its plan"});
  }
  return pool;
}

Answer plan_auto(const Request& request) {
  const search::Context& c = request.c;
  std::vector<Candidate> pool = pooled_plans(c);
  if (!request.budget) return within_replay_allowance(c, pool, "auto");
  pool.insert(pool.end(), request.fallback.begin(), request.fallback.end());  // the current plan among them
  const Candidate* best = search::fastest_fitting(pool, request.target);
  REMAT_CHECK(best, "plan: auto found no plan within {} bytes among {} (make_plan checked that one fits)",
              request.target, pool.size());
  return {.tags = best->tags, .detail = best->origin, .chosen_by = owner_of(*best, "auto")};
}

}  // namespace remat::scheduler::policies
