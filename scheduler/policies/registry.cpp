// The policies by name (policy.h), and what they share with make_plan.
#include "scheduler/policies/policy.h"

#include <algorithm>

#include <fmt/format.h>

namespace remat::scheduler::policies {

const std::vector<Policy>& registry() {
  static const std::vector<Policy> policies{
      {"none", "keep every output", false, &plan_none},
      {"blocks", "replay each block from its input (gradient_checkpointing_enable)", false, &plan_blocks},
      {"sqrt", "keep a cut every total/sqrt(#cuts) bytes read by backward (Chen et al. 2016)", false, &plan_sqrt},
      {"cost", "drop what is cheapest to rebuild per byte", true, &plan_cost},
      {"chain", "the optimum of a chain-of-stages model, checked by the simulator (Beaumont et al.)", true,
       &plan_chain},
      // milp:whole: the program over every tag, no blocks tied or planned apart.
      {"milp", "the optimum over every tag (repeated blocks decided once), a mixed-integer program (CBC, time limit)",
       true, &plan_milp, "whole"},
      {"auto", "the fastest fitting plan of cost, chain, blocks, sqrt and the least-memory search", true,
       &plan_auto},
      {"custom", "the caller's own rule: a tag per node from the profile (PlanOptions::custom)", true, &plan_custom},
      {"save-matmuls", "keep compute-bound outputs, replay the rest (torchtitan's op-level selective checkpointing)",
       true, &plan_save_matmuls, "", false, true},
      // N may be left to a budget: the largest that fits.
      {"every-n-blocks", "replay every N-th block from its input, keep the others (after Megatron's uniform and "
       "block recompute methods)",
       true, &plan_every_n_blocks, "N", false, true},
      {"recompute-modules", "replay the named modules, e.g. attn,mlp,norm or core_attn (Megatron's "
       "--recompute-modules)", true,
       &plan_recompute_modules, "modules", true, true},
      // No plan: eviction at run time within the budget (dtr.h); the
      // Checkpointer runs it, make_plan refuses it.
      {"dtr", "evict at run time within the budget (Kirisame et al. 2021)", true, nullptr},
  };
  return policies;
}

std::string_view argument_of(std::string_view name) {
  const size_t colon = name.find(':');
  return colon == std::string_view::npos ? std::string_view() : name.substr(colon + 1);
}

const Policy& find(const std::string& text) {
  const std::vector<Policy>& policies = registry();
  const std::string name = text.substr(0, text.find(':'));
  const auto found = std::find_if(policies.begin(), policies.end(), [&](const Policy& p) { return p.name == name; });
  if (found != policies.end()) {
    REMAT_CHECK(!found->argument.empty() || text.find(':') == std::string::npos, "recompute policy '{}': {} takes "
                "nothing after a colon", text, name);
    REMAT_CHECK(!found->argument_required || !argument_of(text).empty(), "recompute policy '{}' needs its {} after "
                "a colon ({}:attn,mlp,norm)", text, found->argument, name);
    return *found;
  }
  std::vector<std::string> names;
  for (const Policy& p : policies) {
    names.push_back(p.argument.empty() ? std::string(p.name) : fmt::format("{}:{}", p.name, p.argument));
  }
  if (name == "optimal") {
    REMAT_FAIL("recompute policy 'optimal' is gone: it was the fastest of a pool of plans, now policy 'auto' "
               "(which names the plan it chose); the exact optimum over a chain of stages is 'chain', over every "
               "tag 'milp' (available: {})", fmt::join(names, ", "));
  }
  REMAT_FAIL("unknown recompute policy '{}' (available: {})", text, fmt::join(names, ", "));
}

std::vector<search::Candidate> with_current(const Request& request, std::vector<search::Candidate> pool) {
  if (request.current) pool.push_back(*request.current);
  return pool;
}

Answer within_replay_allowance(const search::Context& c, const std::vector<search::Candidate>& pool,
                               std::string_view policy) {
  const double allowance = kNoBudgetAim * kNoBudgetReplayShare * c.graph.training_step_ms();
  const search::Candidate* chosen = &pool.front();
  for (const search::Candidate& candidate : pool) {
    if (candidate.sim.recompute_ms <= allowance && search::better(candidate.sim, chosen->sim)) chosen = &candidate;
  }
  return {.tags = chosen->tags,
          .detail = fmt::format("replays within {:.0f}% of the step, aiming at {:.1f}% ({:.1f} of {:.1f} ms): {}",
                                100 * kNoBudgetReplayShare, 100 * kNoBudgetAim * kNoBudgetReplayShare,
                                chosen->sim.recompute_ms, allowance, chosen->origin),
          .chosen_by = owner_of(*chosen, policy)};
}

std::string owner_of(const search::Candidate& candidate, std::string_view policy) {
  const std::string& origin = candidate.origin;
  if (origin == kAppliedPlan) return std::string(policy);
  if (origin.rfind("least memory", 0) == 0) return "least-memory search";
  return origin.substr(0, origin.find(':'));
}

Answer fall_back(const Request& request, std::string_view policy) {
  const search::Candidate* best = search::fastest_fitting(request.fallback, request.target);
  REMAT_CHECK(best, "plan: no plan of {} or of the least-memory search is within {} bytes (make_plan checked that "
              "one is)", policy, request.target);
  const std::string owner = owner_of(*best, policy);
  return {.tags = best->tags,
          .detail = owner == policy ? fmt::format("{}: {}", policy, best->origin)
                                    : fmt::format("no plan of {} fits; the least-memory search's: {}", policy,
                                                  best->origin),
          .chosen_by = owner};
}

}  // namespace remat::scheduler::policies
