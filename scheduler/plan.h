// Plans: which node of a profiled graph keeps its output (Tag::Keep) and
// which is replayed in backward (Tag::Recompute), chosen by a policy within
// an optional byte budget, checked by the liveness simulator.
//
//   GraphProfile graph = profile_graph(loss);           // after one step
//   Plan plan = make_plan(graph, {.policy = "cost", .budget = 64 << 20});
//   plan.predicted.peak_bytes;                           // <= 64 MiB
//
// Policies (docs/design.md, "The scheduler"; one file each in
// policies/, registered in policies/registry.cpp):
//   none     keep everything.
//   blocks   replay everything inside a block (BlockScope), keep what is
//            read outside its block: gradient_checkpointing_enable.
//   sqrt     Chen et al. 2016: cut the graph where one value separates it,
//            keep a cut every total/sqrt(#cuts) bytes, replay the rest.
//   cost     the cost rule: drop what is cheapest to rebuild per byte. No
//            budget: memory-bound values, replays within 5% of the step.
//            With a budget: the fastest fitting plan along its descent.
//   chain    the least recompute time within the budget over every choice
//            of kept and replayed stages on the graph's chain of stages
//            (Beaumont et al.'s dynamic program; policies/chain.h).
//   milp     the least recompute time within the budget over every choice
//            of tags, as a mixed-integer program solved by CBC under a
//            time limit, with its bound and gap (policies/milp.h).
//   auto     the fastest fitting plan of cost, chain, blocks and sqrt and
//            the least-memory search, naming the winner (Plan::chosen_by).
//   dtr      no plan (make_plan refuses it): eviction at run time within a
//            budget (policies/dtr.h); the Checkpointer runs it.
// Without a budget, chain and milp keep everything (nothing to trade).
// User overrides (Overrides, checkpoint regions) bind every policy. Budgets
// are planned with a margin of 1% and 64 bytes for memory the profile
// cannot see (scheduler/search.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/profile.h"
#include "scheduler/simulate.h"

namespace remat::scheduler {

// User rules (scheduler/rules.h): each an op ("gelu") or a glob over node
// names ("h.*.attn/*", Note [Node names] in engine/recording.h), as
// PyTorch's selective checkpointing has them. A must rule binds every
// policy: a node it names always keeps its output, or is always replayed
// (a view of a dropped value is dropped whatever the rules say). A prefer
// rule sets the tag of the nodes it names in the policy's plan, unless the
// plan then misses the budget: then the policy's own plan stands and
// Plan::detail says the preferences were set aside. A rule that names no
// node is an error listing the nearest names; so is a node that one rule
// keeps and another replays with the same strength.
struct Overrides {
  std::vector<std::string> must_keep;
  std::vector<std::string> must_recompute;
  std::vector<std::string> prefer_keep;
  std::vector<std::string> prefer_recompute;

  bool operator==(const Overrides&) const = default;
};

// Policy "custom": the caller's own rule, one tag per node of the profiled
// graph (in position order), for researchers who prototype a policy (from
// Python too: model.gradient_checkpointing_enable(policy=callable)).
using CustomPolicy = std::function<std::vector<Tag>(const GraphProfile& graph)>;

struct Plan;

// How long milp searches by default (PlanOptions::solver_time_limit_s): it
// starts from the other policies' plans and, where blocks repeat, from
// blocks planned apart (policies/milp_blocks.h), which on GPT-2's graph
// find in a second or two a plan faster than the one its search of the
// tied program proves optimal in 41 s (Note [Blocks planned apart]); the
// rest of the time buys its bound. Ask for more to prove more.
inline constexpr double kSolverTimeLimitS = 5;

struct PlanOptions {
  std::string policy = "none";
  std::optional<int64_t> budget;  // peak activation bytes over a step
  Overrides overrides;
  double solver_time_limit_s = kSolverTimeLimitS;  // milp's, its whole search
  CustomPolicy custom;  // policy "custom" only
  // How a training loop gets the first plan of a graph (Note [The first
  // step] in scheduler/checkpointer.h): "rehearse" plans it from a
  // rehearsal on the meta device, so the first measured step already runs
  // this policy; "profile" runs that step under blocks (keep-all under
  // none) and plans from its measured times.
  std::string first_step = "rehearse";
  // Told of every plan a Checkpointer makes with these options (Python
  // turns its warnings into Python warnings); may be empty.
  std::function<void(const Plan& plan)> on_plan;
};

// What a solver (milp) said about the plan it returned.
struct SolverReport {
  std::string status;        // "optimal", "time limit", ... (CBC's verdict in words, or why it failed)
  double objective_ms = 0;   // the plan's predicted recompute time (Simulation::recompute_ms)
  double bound_ms = 0;       // proven: no plan of `space` within the budget replays for less
  double gap = 0;            // (objective - bound) / objective; 0 when proven or objective is 0
  double solve_seconds = 0;
  int64_t variables = 0, constraints = 0;  // of the graph's program (its cuts included, once solved)
  // Programs solved: the graph's (each re-solve follows a cut, see milp.cpp)
  // and those of blocks planned apart (policies/milp_blocks.h).
  int64_t solves = 0;
  std::string note;          // "" unless CBC failed once and was tried again, or overran its limit: how and why
  // The plans the bound is over: "every tag", or the plans whose repeated
  // blocks share their first twin's tags (policies/milp.cpp, Note [Repeated
  // blocks solved once]), with the plans it started from: the other
  // policies' and those of blocks planned apart (policies/milp_blocks.h).
  std::string space = "every tag";
  // Where the plan came from: "the program" (CBC found it), or the origin
  // of the plan the search started from and found nothing faster than
  // ("cost: greedy ...", "milp: blocks planned apart, ...").
  std::string found_by = "the program";
};

struct Plan {
  std::string policy;
  std::optional<int64_t> budget;
  uint64_t signature = 0;
  std::vector<Tag> tags;             // by position
  std::vector<std::string> reasons;  // by position: why that tag
  // Whose plan it is: the policy itself, the policy `auto` chose, or
  // "least-memory search" where no plan of the policy's own fits the
  // budget (policies/policy.h, Note [Budgets from bytes alone]).
  std::string chosen_by;
  std::string detail;  // how it was chosen, in a phrase
  std::optional<SolverReport> solver;
  Simulation predicted;
  // Bytes of the outputs backward reads that the plan keeps, and drops.
  int64_t kept_bytes = 0, dropped_bytes = 0;
  // The smallest simulated peak a plan reaches on this graph, and the
  // smallest budget the policies accept for it (the margin added):
  // functions of the graph's bytes alone, the same on every run and
  // machine (policies/policy.h, Note [Budgets from bytes alone]).
  int64_t minimum_peak_bytes = std::numeric_limits<int64_t>::max();
  int64_t minimum_budget_bytes = 0;
  double planning_ms = 0;  // wall time make_plan took
  // Why the plan may not do what was asked of it, in sentences: it drops
  // nothing that keep-all keeps, or its budget is at or above keep-all's
  // peak (Note [Nothing silent]). Empty for policy none, which keeps all by
  // name. `remat explain`, the step report and Python (a warning) say them.
  std::vector<std::string> warnings;
};

std::vector<std::string> policy_names();
void check_policy(const std::string& name);  // an unknown name is an error listing the known ones
bool takes_budget(const std::string& policy);
// save-matmuls, every-n-blocks[:N], recompute-modules:...: the presets of
// other tools (policies/presets.cpp), which plan without a budget too.
bool is_preset(const std::string& policy);
// `text` ("blocks,every-n-blocks:2,recompute-modules:attn,mlp") split into
// policies at the commas that begin a policy's name: a recompute-modules
// list keeps its own commas. Unknown names are errors (check_policy).
std::vector<std::string> split_policies(const std::string& text);
// The policies that take a budget, as a phrase for errors ("cost, chain, milp, auto and dtr").
std::string budget_policies();
// "rehearse" or "profile" (PlanOptions::first_step); anything else is an error naming it.
void check_first_step(const std::string& first_step);
// Whether a training loop rehearses the first step of options' policy: every
// policy that plans, and dtr, which plans nothing but finds in its
// rehearsal the floor its budget must reach (not none, whose plan keeps
// all), unless first_step is "profile".
bool rehearses_first_step(const PlanOptions& options);

// The plan of options.policy for `graph`. Whether a budget is feasible
// depends on the graph's bytes alone (Plan::minimum_budget_bytes); measured
// times only choose among the plans that fit. A budget below the minimum is
// an error naming it. `current`: the tags of the plan a re-plan replaces
// (same graph), a candidate too: a budget it meets is never refused, and it
// stays unless a plan that fits is faster.
Plan make_plan(const GraphProfile& graph, const PlanOptions& options, const std::vector<Tag>* current = nullptr);

// Plan::minimum_peak_bytes and minimum_budget_bytes of `graph`, for every
// policy that takes a budget.
int64_t minimum_peak(const GraphProfile& graph, const Overrides& overrides = {});
int64_t minimum_budget(const GraphProfile& graph, const Overrides& overrides = {});
// The smallest budget whose plans may peak at `peak` bytes.
int64_t budget_for(int64_t peak);

// Shared by the planners -----------------------------------------------------

// Per node: the tag user rules force on it, if any (must rules, checkpoint
// regions); and the tag prefer rules ask for, if any.
std::vector<std::optional<Tag>> forced_tags(const GraphProfile& graph, const Overrides& overrides);
std::vector<std::optional<Tag>> preferred_tags(const GraphProfile& graph, const Overrides& overrides);
// Per node: true when some backward reads its value (directly or through a
// view): only such nodes are worth dropping.
std::vector<bool> read_by_backward(const GraphProfile& graph);
// Fills kept/dropped bytes and the prediction, applies the effective tags.
Plan finish_plan(const GraphProfile& graph, Plan plan);

}  // namespace remat::scheduler
