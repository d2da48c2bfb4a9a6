// The `milp` policy's solve loop and its entry (see milp.h): the program of
// milp_formulation.h, solved by CBC (cbc.h), every plan CBC proposes checked
// by the simulator, cut off (a no-good row) and the program solved again for
// cheaper plans, until none is left (optimal), the time limit, or a failure
// of CBC (Note [CBC in a child process] in cbc.h); the best plan checked
// stands.
#include "scheduler/policies/milp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "engine/error.h"
#include "scheduler/policies/cbc.h"
#include "scheduler/policies/milp_blocks.h"
#include "scheduler/policies/milp_formulation.h"
#include "scheduler/policies/policy.h"
#include "scheduler/repeated_blocks.h"

namespace remat::scheduler {

// Note [Repeated blocks solved once]
// A transformer's blocks are one sub-graph repeated. On GPT-2 124M's graph
// (12 blocks, 307 nodes) the whole-graph program has 35,969 columns and
// 108,037 rows, and CBC stopped at its 60 s limit with a 0.4% gap at half
// of keep-all's peak. As HiRemate (ICML 2025) and torchtitan's planner
// (2026) do, identical blocks are decided once: where
// scheduler/repeated_blocks.h finds blocks identical to an earlier one,
// their drop columns are that first twin's (GPT-2: blocks 1-10 take block
// 0's; the last block, whose output the caller lets go of sooner, is
// decided apart: 2 of 12 blocks decided). A point in a twin block holds
// less than its twin's point in the last twin block, which holds more
// blocks' values, so only the last twin's points keep their memory rows
// (milp_formulation.cpp, rows(); 23,712 columns and 72,981 rows, solved in
// seconds at half the peak). Both make the program smaller, neither makes
// it wrong: every plan it proposes is the whole graph's and the simulator
// checks it, and a plan over the target at a point left out is cut off
// like any other. The space is smaller: the bound and gap CBC proves are
// over the plans whose twins share their tags, together with the other
// policies' plans the search starts from (checked first, they may win);
// SolverReport::space says so. Where a whole-graph solve finishes, the
// tied plan is never faster, and may be dearer (a GPT of 3 blocks at 90%
// of keep-all's peak: tests/scheduler/milp_blocks_test.cpp); so the search
// also starts from blocks planned apart (Note [Blocks planned apart] in
// milp_blocks.cpp), whose blocks need not share their tags, and which find
// that GPT's whole-graph optimum. `milp:whole` solves the whole graph's
// program, untied.

namespace {

using milp::Formulation;
using milp::Program;
using milp::Row;

// The best plan checked so far, and a no-good row for every plan checked:
// it fits and is the best known, or it does not fit.
class Incumbent {
 public:
  Incumbent(const search::Context& c, const Formulation& f, int64_t target) : c_(c), f_(f), target_(target) {}

  void check(const std::vector<Tag>& tags, const std::string& origin = "the program") {
    const std::vector<int>& decision = f_.decision_columns();
    std::vector<bool> key;
    for (size_t i = 0; i < decision.size(); ++i) key.push_back(tags[f_.taggable_nodes()[i]] == Tag::Recompute);
    if (!checked_.insert(key).second) return;
    // Per drop column (twins share one), its value in these tags; a plan
    // whose twins differ is outside the program: nothing to cut.
    std::map<int, bool> dropped;
    bool in_program = true;
    for (size_t i = 0; i < decision.size(); ++i) {
      const auto [it, inserted] = dropped.emplace(decision[i], key[i]);
      in_program = in_program && (inserted || it->second == key[i]);
    }
    if (in_program) {
      Row cut;  // sum of the kept ones' d + sum of the dropped ones' (1 - d) >= 1
      double ones = 0;
      for (const auto& [column, drop] : dropped) {
        cut.terms.push_back({column, drop ? -1.0 : 1.0});
        ones += drop ? 1 : 0;
      }
      cut.lower = 1 - ones;
      cuts_.push_back(std::move(cut));
    }
    try {
      const Simulation sim = c_.simulate(tags);
      if (sim.peak_bytes <= target_ && sim.recompute_ms < best_ms_) {
        best_ms_ = sim.recompute_ms;
        best_ = MilpSolution{tags, {.found_by = origin}};
      }
    } catch (const Error&) {  // a plan the engine could not run fits no budget
    }
  }

  // Where the search starts: keep-all and, if `pooled`, the other
  // policies' plans (policies::pooled_plans) and, where blocks repeat,
  // blocks planned apart within half the time left before `deadline`
  // (Note [Blocks planned apart] in milp_blocks.cpp; their own programs are
  // solved without a pool, so that they plan nothing apart in turn). The
  // program then looks for cheaper plans. What blocks planned apart did.
  BlocksApart seed(bool pooled, const RepeatedBlocks& repeats, std::chrono::steady_clock::time_point deadline) {
    const std::vector<Tag> keep_all(static_cast<size_t>(c_.graph.size()), Tag::Keep);
    check(c_.with_forced(keep_all), "keep-all");
    if (!pooled) return {};
    const std::vector<search::Candidate> pool = policies::pooled_plans(c_);
    for (const search::Candidate& candidate : pool) {
      if (candidate.sim.peak_bytes > target_) continue;
      std::vector<Tag> tags = keep_all;
      for (int64_t v : f_.taggable_nodes()) tags[v] = candidate.tags[v];
      check(c_.with_forced(tags), candidate.origin);
    }
    if (!repeats.any()) return {};
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    BlocksApart apart = plan_blocks_apart(c_, target_, repeats, pool, 0.5 * std::max(0.0, left));
    for (const search::Candidate& plan : apart.plans) check(c_.with_forced(plan.tags), plan.origin);
    return apart;
  }

  // The program's rows, the cuts, and once a plan fits: only cheaper plans.
  std::vector<Row> rows(const Program& program) const {
    std::vector<Row> rows = program.rows;
    rows.insert(rows.end(), cuts_.begin(), cuts_.end());
    if (best_) {
      Row cheaper;
      for (size_t j = 0; j < program.objective.size(); ++j) {
        if (program.objective[j] != 0) cheaper.terms.push_back({static_cast<int>(j), program.objective[j]});
      }
      cheaper.upper = f_.scale() * (best_ms_ - f_.cost_constant()) - 1e-6;
      rows.push_back(std::move(cheaper));
    }
    return rows;
  }

  double best_ms() const { return best_ms_; }
  std::optional<MilpSolution>& best() { return best_; }

 private:
  const search::Context& c_;
  const Formulation& f_;
  int64_t target_;
  std::optional<MilpSolution> best_;
  double best_ms_ = std::numeric_limits<double>::infinity();
  std::set<std::vector<bool>> checked_;
  std::vector<Row> cuts_;
};

// SolverReport::space where repeated blocks share their tags.
std::string space_of(const RepeatedBlocks& repeats, const BlocksApart& apart) {
  return fmt::format("the plans whose {} repeated blocks take their first twin's tags ({} of {} blocks decided), "
                     "the plans of blocks planned apart ({} segments, {} planned by CBC, {} options), and the "
                     "other policies' plans", repeats.repeats, repeats.blocks - repeats.repeats, repeats.blocks,
                     apart.segments, apart.solved, apart.options);
}

}  // namespace

std::optional<MilpSolution> solve_milp(const search::Context& c, int64_t target, const MilpOptions& options,
                                       std::string* status_out) {
  const double time_limit_s = options.time_limit_s;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  if (c.graph.nodes.empty()) return MilpSolution{{}, {.status = "optimal"}};

  const RepeatedBlocks repeats = options.blocks_once ? repeated_blocks(c) : RepeatedBlocks{};
  Formulation f(c, target, repeats.any() ? &repeats.twin_of : nullptr);
  const Program& program = f.program();
  Incumbent incumbent(c, f, target);
  const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(time_limit_s));
  const BlocksApart apart = incumbent.seed(options.pooled, repeats, deadline);

  SolverReport report;
  if (repeats.any()) report.space = space_of(repeats, apart);
  report.solves = apart.solves;
  report.variables = static_cast<int64_t>(program.lower.size());
  report.constraints = static_cast<int64_t>(program.rows.size());
  report.bound_ms = f.cost_constant();
  bool proven = f.hopeless() || f.decision_columns().empty();
  if (proven) report.bound_ms = incumbent.best_ms();
  std::string status = proven ? "optimal" : "time limit";
  while (!proven) {
    const double remaining = time_limit_s - elapsed();
    if (remaining <= std::min(1.0, 0.05 * time_limit_s)) break;  // too little time to prove anything
    const std::vector<Row> rows = incumbent.rows(program);
    const cbc::Program columns = milp::column_major(program, rows);
    const cbc::Outcome outcome =
        options.ends_by_limit ? cbc::solve_within(columns, remaining) : cbc::solve(columns, remaining);
    ++report.solves;
    report.variables = static_cast<int64_t>(program.lower.size());
    report.constraints = static_cast<int64_t>(rows.size());
    if (!outcome.retried.empty()) report.note = outcome.retried;
    // Check what CBC found: its saved solutions and its best.
    for (const std::vector<double>& x : outcome.solutions) incumbent.check(f.tags_of(x.data()));
    const double best_ms = incumbent.best_ms();
    if (outcome.failed) {  // the incumbent stands, unproven (Note [CBC in a child process])
      if (outcome.time_limit) {  // CBC overran its limit and was stopped: still a time limit, said how
        status = "time limit";
        report.note = report.note.empty() ? outcome.status : report.note + "; " + outcome.status;
      } else {
        status = outcome.status;
      }
      break;
    }
    if (outcome.infeasible) {  // nothing cheaper than the best: it is optimal (or nothing fits)
      proven = true;
      status = "optimal";
      report.bound_ms = best_ms;
      break;
    }
    // What the program proved, cut plans aside (each checked, so none is below best_ms).
    const double possible = outcome.best_possible / f.scale() + f.cost_constant();
    // Each solve's bound holds for every plan not yet cut off, and cuts only
    // remove plans checked already (none below best_ms): keep the highest.
    report.bound_ms = std::max(report.bound_ms, std::max(f.cost_constant(), std::min(best_ms, possible)));
    status = outcome.status;
    if (outcome.optimal) {
      // The program's optimum, checked: if the simulator agrees, nothing is cheaper.
      if (best_ms <= possible + 1e-9 * std::max(1.0, std::abs(possible))) {
        proven = true;
        report.bound_ms = best_ms;
        break;
      }
      continue;  // the optimum was cut off; solve again
    }
    if (!outcome.time_limit) break;
  }
  report.status = status;
  report.solve_seconds = elapsed();
  std::optional<MilpSolution>& best = incumbent.best();
  if (!best) {
    if (status_out) *status_out = status;
    return std::nullopt;
  }
  const double best_ms = incumbent.best_ms();
  report.objective_ms = best_ms;
  report.bound_ms = std::min(report.bound_ms, best_ms);
  report.gap = best_ms > 0 ? (best_ms - report.bound_ms) / best_ms : 0;
  report.found_by = best->report.found_by;
  best->report = report;
  return best;
}

namespace policies {

// The solver's plan, or where it found none within its time, the fastest
// least-memory plan that fits, with what the solver said.
Answer plan_milp(const Request& request) {
  const search::Context& c = request.c;
  REMAT_CHECK(request.argument.empty() || request.argument == "whole", "recompute policy 'milp:{}': milp takes "
              "'whole' after a colon (its program over every tag, no blocks tied or planned apart) or nothing",
              request.argument);
  if (!request.budget) {
    return {.tags = search::all(c, Tag::Keep), .detail = "no budget: nothing to trade, every value kept",
            .chosen_by = "milp"};
  }
  std::string status;
  const std::optional<MilpSolution> solution = solve_milp(
      c, request.target, {.time_limit_s = request.time_limit_s, .blocks_once = request.argument != "whole"}, &status);
  if (!solution) {
    Answer answer = fall_back(request, "milp");
    answer.detail = fmt::format("the solver found no plan within {} bytes ({}; time "
                                "limit {:g} s); {}", request.target, status, request.time_limit_s, answer.detail);
    return answer;
  }
  const SolverReport& r = solution->report;
  // On a re-plan its earlier plan stays unless the solver's is faster (a
  // time limit may have cut the search short).
  if (request.current && request.current->sim.peak_bytes <= request.target &&
      request.current->sim.recompute_ms < r.objective_ms) {
    return {.tags = request.current->tags, .detail = fmt::format("milp: the plan applied so far ({:.3f} ms) is "
                                                                 "faster than the solver's ({:.3f} ms, {})",
                                                                 request.current->sim.recompute_ms, r.objective_ms,
                                                                 r.status),
            .chosen_by = "milp"};
  }
  return {.tags = solution->tags,
          .detail = fmt::format("milp: {} over {}, {:.3f} ms (bound {:.3f}, gap {:.2f}%) in {:.2f} s "
                                "(limit {:g} s), {} variables, {} constraints, {} solves; its plan from {}",
                                r.status, r.space, r.objective_ms, r.bound_ms, 100 * r.gap, r.solve_seconds,
                                request.time_limit_s, r.variables, r.constraints, r.solves, r.found_by) +
                    (r.note.empty() ? "" : "; " + r.note),
          .chosen_by = "milp",
          .solver = r};
}

}  // namespace policies
}  // namespace remat::scheduler
