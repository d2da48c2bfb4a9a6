// The planning policies, one file each in this folder, registered by name in
// registry.cpp (docs/design.md, "The scheduler"). make_plan
// (scheduler/plan.cpp) checks the request, asks the policy, then explains
// and simulates its tags; a policy only chooses them.
//
//   none    keep everything (none.cpp)
//   blocks  replay each marked block from its input (blocks.cpp)
//   sqrt    Chen et al. 2016: a kept cut every ~sqrt of the graph (sqrt.cpp)
//   cost    the cost rule: drop what is cheapest to rebuild per byte (cost.cpp)
//   chain   the optimum of a model of the graph's chain of stages (chain.cpp)
//   milp    the whole graph as a mixed-integer program, CBC (milp.cpp)
//   auto    the fastest fitting plan of the others, naming it (auto.cpp)
//   dtr     no plan: eviction at run time within the budget (dtr.cpp; the
//           Checkpointer runs it, make_plan refuses it: Policy::plan null)
//   save-matmuls, every-n-blocks:N, recompute-modules:attn,mlp,norm
//           the presets of other tools, by name (presets.cpp)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/search.h"

namespace remat::scheduler::policies {

struct Request {
  const search::Context& c;
  // The byte budget, if any, and the simulated peak a plan must stay within
  // for it (search::planning_target).
  std::optional<int64_t> budget;
  int64_t target = 0;
  // Plans that fit whenever make_plan accepted the budget: the graph's
  // least-memory plans (Note [Budgets from bytes alone]) and the plan a
  // re-plan replaces. A policy none of whose own plans fits falls back on
  // the fastest of them and says so (Answer::chosen_by).
  const std::vector<search::Candidate>& fallback;
  // The plan a re-plan replaces (same graph), or null: a policy's own
  // earlier plan competes with its new ones, so that it stays unless a
  // plan that fits is faster.
  const search::Candidate* current = nullptr;
  double time_limit_s = kSolverTimeLimitS;  // for solvers (milp)
  // What follows the policy's name and a colon ("every-n-blocks:2" -> "2"),
  // or "" (Policy::argument).
  std::string_view argument;
  const CustomPolicy* custom = nullptr;  // policy custom's rule (PlanOptions::custom)
};

struct Answer {
  std::vector<Tag> tags;
  std::string detail;     // why these tags, in a phrase (Plan::reasons)
  std::string chosen_by;  // whose plan it is (Plan::chosen_by)
  std::optional<SolverReport> solver;
};

struct Policy {
  std::string_view name;
  std::string_view summary;
  bool takes_budget = false;
  Answer (*plan)(const Request& request);
  // What it takes after a colon, for messages ("N", "modules"), or "" for
  // nothing; whether it must be given (without a budget).
  std::string_view argument = "";
  bool argument_required = false;  // an error without it, whatever the budget
  bool preset = false;             // one of presets.cpp's
};

const std::vector<Policy>& registry();
// The policy a policy string names, its argument after a colon
// ("every-n-blocks:2"), or an error listing the known ones; an argument
// given to a policy that takes none is an error too.
const Policy& find(const std::string& name);
// What follows the first colon of `name`, or "".
std::string_view argument_of(std::string_view name);

// `pool` with request.current added (a copy), for a policy to choose from.
std::vector<search::Candidate> with_current(const Request& request, std::vector<search::Candidate> pool);

// Without a budget, cost and auto spend at most this share of a training
// step on replays (GraphProfile::training_step_ms: forward and backward as
// the Checkpointer timed them, the engine's own work between nodes
// included) ...
constexpr double kNoBudgetReplayShare = 0.05;
// ... and plan for this part of it. Replay prices and the step's time each
// move by a few percent from run to run, and measured steps cost what the
// replays cost (W2: the paired overhead tracks the replay clock to within
// its noise), so a plan priced at the whole share would overrun it in about
// half of the runs.
constexpr double kNoBudgetAim = 0.9;
// The plan of least memory in `pool` (search::better) whose replays fit
// that allowance (keep-all, pool's first, always does), as an answer.
Answer within_replay_allowance(const search::Context& c, const std::vector<search::Candidate>& pool,
                               std::string_view policy);
// The policy a candidate's origin names ("cost: greedy, ..." is cost's),
// "least-memory search" for those plans, and `policy` for the plan a
// re-plan replaces (its own earlier choice).
std::string owner_of(const search::Candidate& candidate, std::string_view policy);
// make_plan's origin of the plan a re-plan replaces.
inline constexpr std::string_view kAppliedPlan = "the plan applied so far";

// The fastest of `fallback` within the target, as a policy's answer when
// none of its own plans fits (an error if none fits: make_plan checked).
Answer fall_back(const Request& request, std::string_view policy);

// The plans each policy makes, for `auto` and the least-memory search to
// pool (each simulated on c.graph, its origin naming the policy).
std::vector<Tag> blocks_tags(const search::Context& c);
// The same with only the blocks named in `replayed` replayed (every block
// when it is empty), the others kept.
std::vector<Tag> some_blocks_tags(const search::Context& c, const std::vector<std::string>& replayed);
std::vector<Tag> sqrt_tags(const search::Context& c);
// cost's: the greedy path from keep-all, its static descent, the cost rule.
std::vector<search::Candidate> cost_plans(const search::Context& c);
// chain's: every plan of the chain model's front in (peak, recompute time).
std::vector<search::Candidate> chain_plans(const search::Context& c);
// All of the above: the pool `auto` chooses from (auto.cpp).
std::vector<search::Candidate> pooled_plans(const search::Context& c);

// Note [Budgets from bytes alone]
// Whether a budget can be met must not follow the clock: measured times
// move from run to run, and a minimum found by searches that order their
// candidates by them moved with them (up to 1.32x on small GPTs, so that a
// budget met by one step was refused at the next re-plan). The least-memory
// plans are therefore searched on a copy of the profile whose times are
// nominal (search::nominal_profiles: a fixed roofline of each node's FLOPs
// and bytes, the same on every run and machine) by the policies' own
// searches (cost's and chain's plans, blocks, sqrt), and the lowest of
// them is improved by flipping single tags while the peak falls. The
// smallest simulated peak among them is the graph's minimum (peaks depend
// on bytes alone). A budget below it is refused whatever the policy; a
// policy none of whose own plans fits a budget above it takes the fastest
// of these (Request::fallback) and says so.
// `overrides`: c's. The plans come simulated on c.graph (real times). The
// search is remembered for the graph last searched (Note [Least-memory
// plans remembered] in least_memory.cpp): a graph of the same bytes and
// rules, whatever its times, gets the same plans without a search.
std::vector<search::Candidate> least_memory_plans(const search::Context& c, const Overrides& overrides);
// How many times this process ran that search (a remembered answer is no
// search), and forgetting the remembered one: for tests.
int64_t least_memory_searches();
void forget_least_memory_plans();

// Each policy's entry point, in its own file.
Answer plan_none(const Request& request);
Answer plan_blocks(const Request& request);
Answer plan_sqrt(const Request& request);
Answer plan_cost(const Request& request);
Answer plan_chain(const Request& request);
Answer plan_milp(const Request& request);
Answer plan_auto(const Request& request);
Answer plan_custom(const Request& request);
// The presets (presets.cpp): the anchors of other tools, named.
Answer plan_save_matmuls(const Request& request);
Answer plan_every_n_blocks(const Request& request);
Answer plan_recompute_modules(const Request& request);

}  // namespace remat::scheduler::policies
