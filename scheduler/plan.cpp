// make_plan and what it shares with the policies; see plan.h. The policies
// are in policies/, the pieces they share in search.h.
#include "scheduler/plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "scheduler/policies/policy.h"
#include "scheduler/rules.h"
#include "scheduler/search.h"

namespace remat::scheduler {
namespace {

using namespace search;

// `policy`: the policy whose plan it is (Plan::chosen_by).
// `preferred`: the prefer rules were applied.
std::string reason(const Context& c, const std::string& policy, const std::vector<Tag>& tags, int64_t v,
                   const std::string& detail, bool preferred) {
  const NodeProfile& node = c.graph.nodes[v];
  const bool keep = tags[v] == Tag::Keep;
  if (c.forced[v]) return keep ? "kept by a user rule (must-keep or a checkpoint region's output)"
                               : "replayed by a user rule (must-recompute or inside a checkpoint region)";
  if (preferred && c.preferred[v] == tags[v] && node.view_of < 0) {
    return keep ? "kept by a prefer-keep rule" : "replayed by a prefer-recompute rule";
  }
  if (node.view_of >= 0) return keep ? "a view: holds no bytes of its own" : "a view of a dropped value: dropped too";
  if (v == c.root()) return "the root: backward starts from it";
  if (!c.read[v]) {
    return keep ? "no backward reads it: freed after forward"
                : "no backward reads it, but a dropped value replays from it: dropped and replayed too";
  }
  if (policy == "none") return "policy none keeps every output";
  if (policy == "blocks") {
    if (node.block.empty()) return "outside any block: kept";
    return keep ? fmt::format("output of block {}, read after it: kept (a checkpoint)", node.block)
                : fmt::format("inside block {}: replayed in backward", node.block);
  }
  const std::string price = fmt::format("{:.3f} ms/MiB", node.ms_per_mib());
  if (policy == "cost") {
    const char* kind = node.compute_bound ? "compute-bound" : "memory-bound";
    return fmt::format("{} ({}): {} ({})", kind, price, keep ? "kept" : "replayed", detail);
  }
  if (policy == "sqrt") return keep ? "a cut of the chain, every ~sqrt: kept" : "between sqrt cuts: replayed";
  return fmt::format("{} ({}; plan: {})", keep ? "kept" : "replayed", price, detail);
}

// The tags rules of one strength ask for: `keep` rules, then `recompute`
// rules; a node named by both is an error naming it and both rules.
std::vector<std::optional<Tag>> tags_of_rules(const GraphProfile& graph, const std::vector<std::string>& keep,
                                              const std::vector<std::string>& recompute, std::string_view strength) {
  std::vector<std::optional<Tag>> tags(graph.size());
  std::vector<const std::string*> by_rule(graph.size(), nullptr);
  for (const auto& [rules, tag] : {std::pair{&keep, Tag::Keep}, std::pair{&recompute, Tag::Recompute}}) {
    const std::string kind = fmt::format("{}-{}", strength, tag == Tag::Keep ? "keep" : "recompute");
    for (const std::string& rule : *rules) {
      for (int64_t v : nodes_named(graph, rule, kind)) {
        REMAT_CHECK(!tags[v] || *tags[v] == tag, "plan: node {} is named by {}-keep rule '{}' and by {} rule '{}'; "
                    "a node keeps or replays, not both", graph.nodes[v].name, strength, *by_rule[v], kind, rule);
        tags[v] = tag;
        by_rule[v] = &rule;
      }
    }
  }
  return tags;
}

// Note [Nothing silent]
// A request that cannot change anything is said, never quietly run: a
// rule that names no node is an error (rules.h); a plan that drops nothing
// backward reads, while its policy is not none, and a budget at or above
// keep-all's predicted peak, are warnings on the plan (Plan::warnings)
// that `remat explain`, the step report and Python (warnings.warn) show.
// The users of other tools met each of these as a policy that did nothing
// and said nothing (a selective-checkpointing rule naming an op that never
// matched, a preset mapped to keep-all, a planner an upgrade turned off).
std::vector<std::string> warnings_of(const GraphProfile& graph, const Plan& plan) {
  std::vector<std::string> warnings;
  if (plan.policy != "none" && plan.dropped_bytes == 0) {
    warnings.push_back(fmt::format("policy {} drops none of the {} bytes backward reads: the plan is keep-all's ({})",
                                   plan.policy, plan.kept_bytes, plan.detail));
  }
  if (plan.budget) {
    const int64_t keep_all = simulate(graph, effective_tags(graph, std::vector<Tag>(graph.size(), Tag::Keep))).peak_bytes;
    if (*plan.budget >= keep_all) {
      warnings.push_back(fmt::format("the budget of {} bytes is at or above keep-all's predicted peak of {} bytes: "
                                     "nothing has to be dropped to meet it", *plan.budget, keep_all));
    }
  }
  return warnings;
}

// The policy's answer with the prefer rules applied, unless that misses the
// target (with a budget): then the answer as it was, saying so. Returns
// whether they were applied.
bool apply_preferences(const Context& c, policies::Answer& answer, std::optional<int64_t> budget, int64_t target) {
  if (std::none_of(c.preferred.begin(), c.preferred.end(), [](const auto& tag) { return tag.has_value(); })) {
    return false;
  }
  std::vector<Tag> tags = answer.tags;
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if (c.preferred[v] && !c.forced[v] && v != c.root()) tags[v] = *c.preferred[v];
  }
  const Simulation sim = c.simulate(effective_tags(c.graph, tags));
  if (budget && sim.peak_bytes > target) {
    answer.detail += fmt::format("; the prefer rules set aside: with them the plan peaks at {} bytes, above the {} "
                                 "the budget leaves", sim.peak_bytes, target);
    return false;
  }
  answer.tags = std::move(tags);
  answer.detail += "; prefer rules applied";
  return true;
}

}  // namespace

std::vector<std::string> policy_names() {
  std::vector<std::string> names;
  for (const policies::Policy& policy : policies::registry()) names.emplace_back(policy.name);
  return names;
}

void check_policy(const std::string& name) { (void)policies::find(name); }

bool takes_budget(const std::string& policy) { return policies::find(policy).takes_budget; }

bool is_preset(const std::string& policy) { return policies::find(policy).preset; }

std::vector<std::string> split_policies(const std::string& text) {
  std::vector<std::string> out;
  const std::vector<std::string> names = policy_names();
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::string name = item.substr(0, item.find(':'));
    const bool known = std::find(names.begin(), names.end(), name) != names.end();
    if (!known && !out.empty() && out.back().rfind("recompute-modules:", 0) == 0) {
      out.back() += "," + item;  // another module of the list before it
    } else {
      out.push_back(std::move(item));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  for (const std::string& policy : out) check_policy(policy);
  return out;
}

std::string budget_policies() {
  std::vector<std::string> names;
  for (const policies::Policy& policy : policies::registry()) {
    if (policy.takes_budget) names.emplace_back(policy.name);
  }
  if (names.size() < 2) return fmt::format("{}", fmt::join(names, ""));
  const std::string last = names.back();
  names.pop_back();
  return fmt::format("{} and {}", fmt::join(names, ", "), last);
}

void check_first_step(const std::string& first_step) {
  REMAT_CHECK(first_step == "rehearse" || first_step == "profile", "checkpointing: first step '{}' is neither "
              "rehearse (planned from a rehearsal on the meta device) nor profile (run under blocks and measured)",
              first_step);
}

bool rehearses_first_step(const PlanOptions& options) {
  return options.first_step == "rehearse" && options.policy != "none";
}

std::vector<std::optional<Tag>> forced_tags(const GraphProfile& graph, const Overrides& overrides) {
  const auto consumers = consumers_of(graph);
  std::vector<std::optional<Tag>> forced = tags_of_rules(graph, overrides.must_keep, overrides.must_recompute, "must");
  for (const NodeProfile& node : graph.nodes) {
    if (node.region != 0) {
      const auto& users = consumers[node.position];
      const bool read_outside = std::any_of(users.begin(), users.end(),
                                            [&](int64_t u) { return graph.nodes[u].region != node.region; });
      forced[node.position] = read_outside ? Tag::Keep : Tag::Recompute;
    }
  }
  return forced;
}

std::vector<std::optional<Tag>> preferred_tags(const GraphProfile& graph, const Overrides& overrides) {
  return tags_of_rules(graph, overrides.prefer_keep, overrides.prefer_recompute, "prefer");
}

std::vector<bool> read_by_backward(const GraphProfile& graph) {
  std::vector<bool> read(graph.size(), false);
  for (const NodeProfile& node : graph.nodes) {
    for (int slot : node.saved) {
      if (slot == kSavedOutput) read[node.position] = true;
      if (slot >= 0 && node.inputs[slot] >= 0) read[node.inputs[slot]] = true;
    }
  }
  // A view that is read keeps its base's storage alive: the base is read.
  for (int64_t v = graph.size(); v-- > 0;) {
    const NodeProfile& node = graph.nodes[v];
    if (read[v] && node.view_of >= 0 && node.inputs[node.view_of] >= 0) read[node.inputs[node.view_of]] = true;
  }
  return read;
}

Plan finish_plan(const GraphProfile& graph, Plan plan) {
  plan.tags = effective_tags(graph, std::move(plan.tags));
  plan.signature = graph.signature;
  plan.predicted = simulate(graph, plan.tags);
  const std::vector<bool> read = read_by_backward(graph);
  for (int64_t v = 0; v < graph.size(); ++v) {
    if (!read[v]) continue;
    (plan.tags[v] == Tag::Keep ? plan.kept_bytes : plan.dropped_bytes) += graph.nodes[v].output_bytes;
  }
  return plan;
}

Plan make_plan(const GraphProfile& graph, const PlanOptions& options, const std::vector<Tag>* current) {
  const policies::Policy& policy = policies::find(options.policy);
  REMAT_CHECK(policy.plan != nullptr, "plan: policy {} makes no plan: it evicts at run time within its budget "
              "(scheduler/policies/dtr.h; a Checkpointer runs it)", options.policy);
  REMAT_CHECK(!options.budget || *options.budget > 0, "plan: the budget must be positive, got {} bytes",
              *options.budget);
  REMAT_CHECK(!options.budget || policy.takes_budget, "plan: policy {} takes no budget ({} do)", options.policy,
              budget_policies());
  REMAT_CHECK(std::isfinite(options.solver_time_limit_s) && options.solver_time_limit_s > 0, "plan: the solver's "
              "time limit must be a positive number of seconds, got {}", options.solver_time_limit_s);
  const auto start = std::chrono::steady_clock::now();
  const Context c(graph, options.overrides);
  Plan plan{.policy = options.policy, .budget = options.budget};
  // Note [Budgets from bytes alone] (policies/policy.h): the minimum comes
  // from plans searched on nominal times; a budget it fits, or that the
  // plan a re-plan replaces fits, is planned, any other is refused,
  // whatever the clock says.
  std::vector<Candidate> fallback = policies::least_memory_plans(c, options.overrides);
  plan.minimum_peak_bytes = search::least_memory(fallback).sim.peak_bytes;
  plan.minimum_budget_bytes = budget_for_peak(plan.minimum_peak_bytes);
  std::optional<Candidate> applied;
  if (current) {
    REMAT_CHECK(static_cast<int64_t>(current->size()) == graph.size(), "plan: the current plan has {} tags for a "
                "graph of {} nodes", current->size(), graph.size());
    applied = Candidate{*current, c.simulate(*current), std::string(policies::kAppliedPlan)};
    fallback.push_back(*applied);
  }
  int64_t target = 0;
  if (options.budget) {
    const int64_t reachable = std::min(plan.minimum_peak_bytes, applied ? applied->sim.peak_bytes : plan.minimum_peak_bytes);
    target = planning_target(*options.budget);
    if (target < reachable) fail_budget(options.policy, *options.budget, reachable);
  }
  policies::Answer answer = policy.plan({.c = c, .budget = options.budget, .target = target,
                                               .fallback = fallback, .current = applied ? &*applied : nullptr,
                                               .time_limit_s = options.solver_time_limit_s,
                                               .argument = policies::argument_of(options.policy),
                                               .custom = &options.custom});
  const bool preferred = apply_preferences(c, answer, options.budget, target);
  plan.tags = answer.tags;
  plan.chosen_by = answer.chosen_by;
  plan.detail = answer.detail;
  plan.solver = answer.solver;
  for (int64_t v = 0; v < graph.size(); ++v) {
    plan.reasons.push_back(reason(c, answer.chosen_by, plan.tags, v, answer.detail, preferred));
  }
  plan = finish_plan(graph, std::move(plan));
  plan.warnings = warnings_of(graph, plan);
  REMAT_CHECK(!options.budget || plan.predicted.peak_bytes <= target, "plan: policy {} chose a plan of {} bytes for "
              "a target of {} ({})", options.policy, plan.predicted.peak_bytes, target, answer.detail);
  plan.planning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

int64_t minimum_peak(const GraphProfile& graph, const Overrides& overrides) {
  const Context c(graph, overrides);
  int64_t minimum = std::numeric_limits<int64_t>::max();
  for (const Candidate& candidate : policies::least_memory_plans(c, overrides)) {
    minimum = std::min(minimum, candidate.sim.peak_bytes);
  }
  return minimum;
}

int64_t budget_for(int64_t peak) { return budget_for_peak(peak); }

int64_t minimum_budget(const GraphProfile& graph, const Overrides& overrides) {
  return budget_for_peak(minimum_peak(graph, overrides));
}

}  // namespace remat::scheduler

