// The `milp` policy's program as plain data (milp.h): linear expressions over
// columns, rows with bounds, the columns' boxes, integrality and objective,
// and its copy in CBC's column-major layout. Built by milp_formulation.cpp,
// solved by milp.cpp through cbc.h. Internal to the milp policy.
#pragma once

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "scheduler/policies/cbc.h"

namespace remat::scheduler::milp {

inline constexpr double kInfinity = std::numeric_limits<double>::max();  // COIN_DBL_MAX: an open side of a row

// c + sum of coefficient * column.
struct Linear {
  double constant = 0;
  std::vector<std::pair<int, double>> terms;

  static Linear column(int col) { return {0, {{col, 1.0}}}; }
  bool is_constant() const { return terms.empty(); }
  // Columns are 0/1-bounded, so max and min are over the box.
  double max() const;
  double min() const;
  // Terms sorted by column, one per column, none zero.
  void normalize();
};

Linear operator+(Linear a, const Linear& b);
Linear operator-(Linear a, const Linear& b);
Linear operator*(double k, Linear a);
inline Linear constant(double c) { return {c, {}}; }

struct Row {
  std::vector<std::pair<int, double>> terms;
  double lower = -kInfinity, upper = kInfinity;
};

// The program, as plain arrays (CBC gets a fresh copy per solve).
struct Program {
  std::vector<double> lower, upper, objective;
  std::vector<bool> integer;
  std::vector<Row> rows;

  // A new column in [lo, hi]; its index.
  int column(double lo, double hi, bool is_integer);
  // e <= hi and e >= lo (the constant moved to the right). A constant row
  // is left out: the simulator checks those, not the program.
  void at_most(const Linear& e, double hi);
  void at_least(const Linear& e, double lo);
};

// The program with `rows` as its rows, in CBC's layout.
cbc::Program column_major(const Program& program, const std::vector<Row>& rows);

}  // namespace remat::scheduler::milp
