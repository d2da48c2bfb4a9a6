// CBC in a child process (Note [CBC in a child process]): its answers come
// back whole, a solver that dies fails the solve, not the caller, and one
// that hangs is killed past its grace, or by its seconds (solve_within).
#include "scheduler/policies/cbc.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>

namespace remat::scheduler {
namespace {

constexpr double kOpen = std::numeric_limits<double>::max();

// max 5a + 4b + 3c (min of the negation) with 2a + 3b + c <= 5, 4a + b + 2c <= 11,
// 3a + 4b + 2c <= 8, integer in [0, 10]: the optimum is a = 2, b = 0, c = 1 (13).
cbc::Program small_program() {
  cbc::Program p{.objective = {-5, -4, -3}, .lower = {0, 0, 0}, .upper = {10, 10, 10}, .integer = {true, true, true}};
  const double a[3][3] = {{2, 3, 1}, {4, 1, 2}, {3, 4, 2}};  // rows by columns
  p.column_start.push_back(0);
  for (int j = 0; j < 3; ++j) {
    for (int r = 0; r < 3; ++r) {
      p.index.push_back(r);
      p.value.push_back(a[r][j]);
    }
    p.column_start.push_back(static_cast<int>(p.index.size()));
  }
  p.row_lower = {-kOpen, -kOpen, -kOpen};
  p.row_upper = {5, 11, 8};
  return p;
}

TEST(Cbc, AnswersComeBackFromTheChildWhole) {
  const cbc::Outcome o = cbc::solve(small_program(), 30);
  ASSERT_FALSE(o.failed) << o.status;
  EXPECT_TRUE(o.optimal);
  EXPECT_EQ(o.status, "optimal");
  EXPECT_NEAR(o.best_possible, -13, 1e-6);
  ASSERT_FALSE(o.solutions.empty());
  const std::vector<double>& x = o.solutions.back();
  ASSERT_EQ(x.size(), 3u);
  EXPECT_NEAR(x[0], 2, 1e-6);
  EXPECT_NEAR(x[1], 0, 1e-6);
  EXPECT_NEAR(x[2], 1, 1e-6);
}

TEST(Cbc, AnEmptyIntegerSetIsInfeasible) {
  cbc::Program p = small_program();
  p.row_lower = {6, -kOpen, -kOpen};  // 2a + 3b + c >= 6 and <= 5
  const cbc::Outcome o = cbc::solve(p, 30);
  ASSERT_FALSE(o.failed) << o.status;
  EXPECT_TRUE(o.infeasible);
  EXPECT_TRUE(o.solutions.empty());
}

void die() {
  std::fputs("ClpPrimalColumnSteepest.cpp:729: Assertion failed (a stand-in)\n", stderr);
  std::abort();
}

TEST(Cbc, ASolverThatAbortsFailsTheSolveNamingWhatItPrinted) {
  const cbc::Outcome o = cbc::solve(small_program(), 30, die);
  EXPECT_TRUE(o.failed);
  EXPECT_FALSE(o.optimal);
  EXPECT_TRUE(o.solutions.empty());
  EXPECT_NE(o.status.find("signal 6"), std::string::npos) << o.status;
  EXPECT_NE(o.status.find("Assertion failed (a stand-in)"), std::string::npos) << o.status;
  EXPECT_NE(o.status.find("again without presolve"), std::string::npos) << o.status;  // tried twice
}

// Dies the first time (the mark is a file: a child's memory goes with it).
std::filesystem::path mark;
void die_once() {
  if (std::filesystem::exists(mark)) return;
  std::FILE* f = std::fopen(mark.c_str(), "w");
  if (f) std::fclose(f);
  die();
}

TEST(Cbc, AFailedSolveIsTriedAgainWithCarefulSettingsAndTheirAnswerIsRight) {
  mark = std::filesystem::temp_directory_path() / ("remat_cbc_test_" + std::to_string(getpid()));
  std::filesystem::remove(mark);
  const cbc::Outcome o = cbc::solve(small_program(), 30, die_once);
  std::filesystem::remove(mark);
  ASSERT_FALSE(o.failed) << o.status;
  EXPECT_TRUE(o.optimal);
  EXPECT_EQ(o.status, "optimal");  // the verdict; how it came is apart
  EXPECT_NE(o.retried.find("second try"), std::string::npos) << o.retried;
  EXPECT_NE(o.retried.find("signal 6"), std::string::npos) << o.retried;
  ASSERT_FALSE(o.solutions.empty());
  EXPECT_NEAR(o.solutions.back()[0], 2, 1e-6);
  EXPECT_NEAR(o.solutions.back()[2], 1, 1e-6);
}

// A solver that hangs (its first node on a large program, CBC's clock
// unread): solve() kills it past its grace (1.5 s over a short limit),
// solve_within() when its seconds are up, so that milp's search ends by
// its time limit. The bounds are a wide margin around each kill.
void hang() { sleep(30); }

TEST(Cbc, SolveWithinEndsByItsSecondsWhateverTheSolverDoes) {
  using Clock = std::chrono::steady_clock;
  const auto seconds_of = [](Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  };
  auto start = Clock::now();
  const cbc::Outcome within = cbc::solve_within(small_program(), 0.5, hang);
  const double within_s = seconds_of(start);
  EXPECT_TRUE(within.failed);
  EXPECT_TRUE(within.time_limit);
  EXPECT_NE(within.status.find("time limit"), std::string::npos) << within.status;
  EXPECT_LT(within_s, 1.5);
  start = Clock::now();
  const cbc::Outcome graced = cbc::solve(small_program(), 0.5, hang);
  EXPECT_TRUE(graced.time_limit);
  EXPECT_GE(seconds_of(start), 1.9);  // 0.5 s and its grace of 1.5 s
  // A program that finishes in time is solved as solve() solves it.
  const cbc::Outcome solved = cbc::solve_within(small_program(), 30);
  ASSERT_FALSE(solved.failed) << solved.status;
  EXPECT_TRUE(solved.optimal);
  EXPECT_NEAR(solved.best_possible, -13, 1e-6);
}

}  // namespace
}  // namespace remat::scheduler
