// COIN-OR CBC behind a wall: one mixed-integer program solved in a child
// process, so that the solver failing cannot take the engine with it.
//
// Note [CBC in a child process]
// Debian 12's CLP 1.17.6 is built with its assertions on, and some of them
// fire on well-posed programs (coin-or/Clp#59: "Assertion
// `model_->reducedCost(bestSequence) > 0.0' failed" in
// ClpPrimalColumnSteepest, seen on a profiled GPT). An assertion aborts the
// process: a whole training run lost to its planner. So each solve runs in a
// fork()ed child that writes CBC's verdict and solutions down a pipe and
// leaves with _exit; the parent reads them, and a child that dies (a signal,
// a crash, a write cut short) or overruns its time limit (CBC counting wall
// time) by its grace, 1.5 s or a tenth of the limit (then it is killed),
// is a failed solve, named with what it printed, never
// a crash of the caller. The child only runs CBC (no OpenMP, no engine code:
// an exception ends it, never unwinds into its callers), which is safe
// after fork() in a threaded process: glibc's malloc is.
// A solve that fails is tried once more with Dantzig pricing and without
// presolve, which leave out the code the known assertions sit in.
#pragma once

#include <string>
#include <vector>

namespace remat::scheduler::cbc {

// min objective . x subject to row_lower <= A x <= row_upper and
// lower <= x <= upper, x_j integer where integer[j]; A column-major
// (CoinPackedMatrix's layout: column j's entries are index/value
// [column_start[j], column_start[j + 1])). An open side is
// std::numeric_limits<double>::max().
struct Program {
  std::vector<double> objective, lower, upper;
  std::vector<bool> integer;
  std::vector<int> column_start, index;
  std::vector<double> value;
  std::vector<double> row_lower, row_upper;

  int columns() const { return static_cast<int>(objective.size()); }
  int rows() const { return static_cast<int>(row_lower.size()); }
};

struct Outcome {
  bool optimal = false;     // proven optimal
  bool infeasible = false;  // proven to have no solution
  bool time_limit = false;  // stopped by the time limit
  std::string status;       // in words: "optimal", "infeasible", "time limit", or why it failed
  std::string retried;      // "" unless the first try failed: how the second went, and why
  bool failed = false;      // the solver died or was killed: nothing below is known
  double best_possible = 0; // CBC's proven lower bound on the objective
  std::vector<std::vector<double>> solutions;  // what it found (saved ones, then its best), columns() each
};

// Solves `program` within about `seconds`, in a child process (see the
// Note). Never throws for the solver's sake; a failure is Outcome::failed.
// `in_child`, for tests, runs in each child before CBC does (to make one die).
Outcome solve(const Program& program, double seconds, void (*in_child)() = nullptr);
// The same, over within `seconds` whatever CBC does: CBC is given nine
// tenths of them, and a child still running at `seconds` is killed (a time
// limit; what it found is lost). milp's search calls it, so that it ends by
// its time limit; a large program's first node alone can outlast any limit.
Outcome solve_within(const Program& program, double seconds, void (*in_child)() = nullptr);

}  // namespace remat::scheduler::cbc
