// The milp policy's program as plain data; see milp_program.h.
#include "scheduler/policies/milp_program.h"

namespace remat::scheduler::milp {

double Linear::max() const {
  double m = constant;
  for (const auto& [col, coef] : terms) m += std::max(coef, 0.0);
  return m;
}

double Linear::min() const {
  double m = constant;
  for (const auto& [col, coef] : terms) m += std::min(coef, 0.0);
  return m;
}

void Linear::normalize() {
  std::sort(terms.begin(), terms.end());
  std::vector<std::pair<int, double>> merged;
  for (const auto& t : terms) {
    if (!merged.empty() && merged.back().first == t.first) {
      merged.back().second += t.second;
    } else {
      merged.push_back(t);
    }
  }
  std::erase_if(merged, [](const auto& t) { return t.second == 0; });
  terms = std::move(merged);
}

Linear operator+(Linear a, const Linear& b) {
  a.constant += b.constant;
  a.terms.insert(a.terms.end(), b.terms.begin(), b.terms.end());
  a.normalize();
  return a;
}

Linear operator-(Linear a, const Linear& b) {
  a.constant -= b.constant;
  for (const auto& [col, coef] : b.terms) a.terms.push_back({col, -coef});
  a.normalize();
  return a;
}

Linear operator*(double k, Linear a) {
  a.constant *= k;
  for (auto& t : a.terms) t.second *= k;
  return a;
}

int Program::column(double lo, double hi, bool is_integer) {
  lower.push_back(lo);
  upper.push_back(hi);
  objective.push_back(0);
  integer.push_back(is_integer);
  return static_cast<int>(lower.size() - 1);
}

void Program::at_most(const Linear& e, double hi) {
  if (e.is_constant()) return;
  rows.push_back({e.terms, -kInfinity, hi - e.constant});
}

void Program::at_least(const Linear& e, double lo) {
  if (e.is_constant()) return;
  rows.push_back({e.terms, lo - e.constant, kInfinity});
}

// The program with `rows` as its rows, in CBC's layout.
cbc::Program column_major(const Program& program, const std::vector<Row>& rows) {
  cbc::Program p{.objective = program.objective, .lower = program.lower, .upper = program.upper,
                 .integer = program.integer};
  std::vector<std::vector<std::pair<int, double>>> by_column(program.lower.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    for (const auto& [column, coefficient] : rows[r].terms) by_column[column].push_back({static_cast<int>(r), coefficient});
    p.row_lower.push_back(rows[r].lower);
    p.row_upper.push_back(rows[r].upper);
  }
  p.column_start.push_back(0);
  for (const auto& column : by_column) {
    for (const auto& [r, coefficient] : column) {
      p.index.push_back(r);
      p.value.push_back(coefficient);
    }
    p.column_start.push_back(static_cast<int>(p.index.size()));
  }
  return p;
}
}  // namespace remat::scheduler::milp
