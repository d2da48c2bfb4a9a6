// The `milp` policy's solver (see milp.h): a mixed-integer program over the
// taggable nodes' keep/drop choices (every plan the engine can run), solved
// by CBC, every proposal checked by the simulator, cut off and re-solved
// when the check disagrees.
//
// Note [The milp relaxation]
// Its space is the engine's: every node that owns bytes and that no rule
// binds (search::Context::taggable), whether a backward reads it or only the
// replay of a dropped consumer does (a kept one is then held by that
// consumer's replay inputs until it is replayed). The truth is
// scheduler::simulate. The program is built to be a relaxation
// of it: for every tag vector there are values of the auxiliary columns under
// which each modelled memory level is at most the simulator's level at that
// point, and the modelled cost is at most Simulation::recompute_ms. So the
// program never cuts off a plan that fits, and its bound is a bound on every
// plan. Its columns:
//   d_v       binary, per taggable node: 1 drops (Recompute), 0 keeps. The
//             other nodes are constants (their forced tag, else Keep), and
//             views follow their base as effective_tags() has it.
//   m_{y,s}   "y has been replayed by backward step s" (continuous, but fixed
//             to 0/1 by the d's): y is dropped and a saved value of step s or
//             earlier reads it, or a dropped consumer of y was replayed by
//             then. It changes only at the steps where a demand can reach y,
//             so it has a column only there; from the first step that reads
//             y directly it is d_y itself.
//   a         continuous, "this storage is alive at this point": at least
//             each of the ways it can be held (a caller's handle, a saved
//             value, the replay inputs of a dropped consumer not replayed yet,
//             the rebuilt value while some reader has not run).
// Rows: one per forward node (its level before it ran plus its measured
// rise), one per backward step that has a gradient (gradient buffers, side
// results not released yet and its measured rise, plus every storage alive),
// and one for the rise after a saved value a backward lets go of early. The
// rise inside a replay is not modelled, nor is a replay over its input
// priced apart where one can happen (the cheaper of the two prices is used):
// both only make the program weaker, never wrong. The loop (solve_milp)
// simulates what CBC proposes, keeps the best plan that fits, cuts off every
// plan it checked (a no-good row) and stops when the program, restricted to
// plans cheaper than the best, is proven empty, or at the time limit, or
// when CBC fails (it runs in a child process: Note [CBC in a child process]
// in cbc.h), keeping the best plan checked so far.
#include "scheduler/policies/milp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "engine/error.h"
#include "scheduler/policies/cbc.h"
#include "scheduler/policies/policy.h"

namespace remat::scheduler {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max() / 4;
constexpr double kInfinity = std::numeric_limits<double>::max();  // COIN_DBL_MAX: an open side of a row

// c + sum of coefficient * column.
struct Linear {
  double constant = 0;
  std::vector<std::pair<int, double>> terms;

  static Linear column(int col) { return {0, {{col, 1.0}}}; }
  bool is_constant() const { return terms.empty(); }
  double max() const {
    double m = constant;
    for (const auto& [col, coef] : terms) m += std::max(coef, 0.0);
    return m;
  }
  double min() const {
    double m = constant;
    for (const auto& [col, coef] : terms) m += std::min(coef, 0.0);
    return m;
  }
  // Columns are 0/1-bounded, so max and min above are over the box.
  void normalize() {
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
};

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
Linear constant(double c) { return {c, {}}; }

struct Row {
  std::vector<std::pair<int, double>> terms;
  double lower = -kInfinity, upper = kInfinity;
};

// The program, as plain arrays (CBC gets a fresh copy per solve).
struct Program {
  std::vector<double> lower, upper, objective;
  std::vector<bool> integer;
  std::vector<Row> rows;

  int column(double lo, double hi, bool is_integer) {
    lower.push_back(lo);
    upper.push_back(hi);
    objective.push_back(0);
    integer.push_back(is_integer);
    return static_cast<int>(lower.size() - 1);
  }
  // e <= hi (the constant moved to the right).
  void at_most(const Linear& e, double hi) {
    if (e.is_constant()) return;  // a constant row is checked by the simulator, not here
    rows.push_back({e.terms, -kInfinity, hi - e.constant});
  }
  void at_least(const Linear& e, double lo) {
    if (e.is_constant()) return;
    rows.push_back({e.terms, lo - e.constant, kInfinity});
  }
};

// Who holds a storage, and when (see Formulation::alive).
struct Holder {
  enum Kind { kCaller, kSave, kReplay } kind;
  int64_t member;  // the node whose value it holds (the storage's owner or a view of it); -1: an outside input
  int64_t node;    // the holder: the saving or replaying node (kCaller: the member)
  int index = -1;  // kSave: the index into NodeProfile::saved
  int64_t from = 0, to = 0;  // kCaller: alive at forward points t with from < t < to
  bool in_backward = false;  // kCaller: still held in backward (the root)
};

// A storage: a node's output (with its views) or an input from outside.
struct Unit {
  int64_t bytes = 0;
  bool outside = false;
  int64_t owner = -1;  // the node that made it (-1: an outside input)
  std::vector<Holder> holders;
};

// A point where the simulator notes a peak.
struct Point {
  bool backward = false;
  int64_t at = 0;  // forward: the node; backward: the step
  int64_t excluded_node = -1;  // a saved value already let go of (backward_late_peak_bytes)
  int excluded_index = -1;
  double constant = 0;  // bytes that no tag changes, the rise included
};

class Formulation {
 public:
  Formulation(const search::Context& c, int64_t target) : c_(c), g_(c.graph), n_(c.graph.size()), target_(target) {
    decide();
    backward_order();
    replays();
    units();
    rows();
  }

  Program& program() { return program_; }
  const std::vector<int64_t>& taggable_nodes() const { return taggable_; }
  const std::vector<int>& decision_columns() const { return decision_col_; }

  std::vector<Tag> tags_of(const double* x) const {
    std::vector<Tag> tags(static_cast<size_t>(n_), Tag::Keep);
    for (size_t i = 0; i < taggable_.size(); ++i) {
      if (x[decision_col_[i]] > 0.5) tags[static_cast<size_t>(taggable_[i])] = Tag::Recompute;
    }
    return c_.with_forced(std::move(tags));
  }

 private:
  // d_v: the drop of each node, a column for the taggable ones.
  void decide() {
    drop_.assign(static_cast<size_t>(n_), constant(0));
    std::vector<bool> leaves_region(static_cast<size_t>(n_), false);
    for (const NodeProfile& node : g_.nodes) {
      for (int64_t input : node.inputs) {
        if (input >= 0 && g_.nodes[input].region != 0 && g_.nodes[input].region != node.region) {
          leaves_region[input] = true;
        }
      }
    }
    for (int64_t v = 0; v < n_; ++v) {
      if (c_.taggable(v)) {
        taggable_.push_back(v);
        decision_col_.push_back(program_.column(0, 1, true));
        drop_[v] = Linear::column(decision_col_.back());
      } else if (c_.forced[v] && *c_.forced[v] == Tag::Recompute) {
        drop_[v] = constant(1);
      }
      const NodeProfile& node = g_.nodes[v];
      if (node.view_of >= 0 && !leaves_region[v]) {  // a view of a dropped value is dropped (effective_tags)
        const int64_t base = node.inputs[static_cast<size_t>(node.view_of)];
        if (base >= 0 && drop_[v].max() < 1) drop_[v] = drop_[base];
      }
    }
  }
  bool droppable(int64_t v) const { return v >= 0 && drop_[v].max() > 0; }
  Linear kept(int64_t v) const { return constant(1) - drop_[v]; }

  // The executor's order (simulate.cpp, backward()), which no tag changes,
  // and the gradient bytes live at each step's peak.
  void backward_order() {
    const int64_t total = n_ + g_.leaves;
    auto target = [&](int64_t v, size_t i) -> int64_t {
      const NodeProfile& node = g_.nodes[v];
      if (node.inputs[i] >= 0) return node.inputs[i];
      return node.leaves[i] >= 0 ? n_ + node.leaves[i] : -1;
    };
    std::vector<int> dependencies(static_cast<size_t>(total), 0);
    for (int64_t v = 0; v < n_; ++v) {
      for (size_t i = 0; i < g_.nodes[v].inputs.size(); ++i) {
        if (const int64_t t = target(v, i); t >= 0) ++dependencies[t];
      }
    }
    std::vector<int64_t> bytes;
    std::vector<int> refs;
    int64_t live = 0;
    auto make = [&](int64_t b) {
      bytes.push_back(b);
      refs.push_back(1);
      live += b;
      return static_cast<int>(bytes.size() - 1);
    };
    auto ref = [&](int s) {
      if (s >= 0) ++refs[s];
    };
    auto unref = [&](int s) {
      if (s >= 0 && --refs[s] == 0) live -= bytes[s];
    };
    pos_.assign(static_cast<size_t>(n_), kNever);
    has_grad_.assign(static_cast<size_t>(n_), false);
    grad_live_.assign(static_cast<size_t>(n_), 0);
    std::vector<int> buffer(static_cast<size_t>(total), -1);
    const int64_t root = n_ - 1;
    buffer[root] = make(g_.nodes[root].dense_output_bytes());
    std::priority_queue<int64_t> ready;
    ready.push(root);
    while (!ready.empty()) {
      const int64_t v = ready.top();
      ready.pop();
      if (v >= n_) {
        unref(buffer[v]);
        buffer[v] = -1;
        continue;
      }
      const NodeProfile& node = g_.nodes[v];
      pos_[v] = static_cast<int64_t>(order_.size());
      order_.push_back(v);
      has_grad_[v] = buffer[v] >= 0;
      grad_live_[v] = live;
      std::vector<int> grads(node.inputs.size(), -1);
      if (has_grad_[v]) {
        for (size_t i = 0; i < grads.size(); ++i) {
          const int64_t b = i < node.grad_bytes.size() ? node.grad_bytes[i] : kNoGradient;
          if (b == kGradientAliasesOutput) {
            grads[i] = buffer[v];
            ref(grads[i]);
          } else if (b >= 0) {
            grads[i] = make(b);
          }
        }
        unref(buffer[v]);
        buffer[v] = -1;
      }
      for (size_t i = 0; i < grads.size(); ++i) {
        const int64_t t = target(v, i);
        if (t < 0) {
          unref(grads[i]);
          continue;
        }
        if (grads[i] >= 0) {
          if (buffer[t] < 0) {
            buffer[t] = grads[i];
          } else {
            const int sum = make(numel(node.input_shapes[i]) * dtype_size(node.input_dtypes[i]));
            unref(buffer[t]);
            unref(grads[i]);
            buffer[t] = sum;
          }
        }
        if (--dependencies[t] == 0) ready.push(t);
      }
    }
  }

  // The source a saved slot of node v reads (a node), or -1.
  int64_t source(int64_t v, int slot) const {
    if (slot == kSavedOutput) return v;
    return slot >= 0 ? g_.nodes[v].inputs[static_cast<size_t>(slot)] : -1;
  }

  // m_{y,s}: columns at the steps where a demand can first reach y, the rows
  // that fix them, and the objective.
  void replays() {
    first_read_.assign(static_cast<size_t>(n_), kNever);
    for (int64_t v = 0; v < n_; ++v) {
      if (!has_grad_[v]) continue;
      for (int slot : g_.nodes[v].saved) {
        const int64_t y = source(v, slot);
        if (droppable(y)) first_read_[y] = std::min(first_read_[y], pos_[v]);
      }
    }
    consumers_.assign(static_cast<size_t>(n_), {});
    for (int64_t y = 0; y < n_; ++y) {
      std::set<int64_t> unique;
      for (int64_t w : c_.consumers[y]) {
        if (droppable(w)) unique.insert(w);
      }
      consumers_[y].assign(unique.begin(), unique.end());
    }
    changes_.assign(static_cast<size_t>(n_), {});
    replay_col_.assign(static_cast<size_t>(n_), {});
    for (int64_t y = n_; y-- > 0;) {
      if (!droppable(y)) continue;
      std::set<int64_t> steps;
      if (first_read_[y] < kNever) steps.insert(first_read_[y]);
      for (int64_t w : consumers_[y]) {
        for (int64_t s : changes_[w]) {
          if (s < first_read_[y]) steps.insert(s);
        }
      }
      changes_[y].assign(steps.begin(), steps.end());
      for (int64_t s : changes_[y]) replay_col_[y].push_back(s < first_read_[y] ? program_.column(0, 1, false) : -1);
    }
    for (int64_t y = 0; y < n_; ++y) {
      for (size_t k = 0; k < changes_[y].size(); ++k) {
        const int col = replay_col_[y][k];
        if (col < 0) continue;
        const int64_t s = changes_[y][k];
        const Linear m = Linear::column(col);
        program_.at_most(m - drop_[y], 0);
        Linear any = constant(0);
        for (int64_t w : consumers_[y]) {
          any = any + replayed_by(w, s);
          program_.at_most(replayed_by(w, s) + drop_[y] - m, 1);
        }
        program_.at_most(m - any, 0);
      }
    }
    // The cost: each replay once, at the cheaper price where it may run in place.
    const int64_t last = order_.empty() ? 0 : static_cast<int64_t>(order_.size()) - 1;
    Linear cost = constant(0);
    for (int64_t y = 0; y < n_; ++y) {
      if (!droppable(y)) continue;
      const Linear part = price(y) * replayed_by(y, last);
      cost.constant += part.constant;
      cost.terms.insert(cost.terms.end(), part.terms.begin(), part.terms.end());
    }
    cost.normalize();
    cost_constant_ = cost.constant;
    total_price_ = 0;
    for (const auto& [col, coef] : cost.terms) total_price_ += std::abs(coef);
    scale_ = total_price_ > 0 ? 1000.0 / total_price_ : 1.0;  // CBC's tolerances are absolute
    for (const auto& [col, coef] : cost.terms) program_.objective[col] += scale_ * coef;
  }

 public:
  double scale() const { return scale_; }
  double cost_constant() const { return cost_constant_; }

 private:
  double price(int64_t y) const {
    const NodeProfile& node = g_.nodes[y];
    const int over = node.overwritable_input;
    bool may_be_in_place = over >= 0 && static_cast<size_t>(over) < node.inputs.size() && node.view_of < 0 &&
                           node.inputs[static_cast<size_t>(over)] >= 0;
    if (may_be_in_place) {
      const auto i = static_cast<size_t>(over);
      may_be_in_place = node.input_shapes[i] == node.output_shape && node.input_dtypes[i] == node.output_dtype &&
                        g_.nodes[node.inputs[i]].output_dense;
    }
    const double fresh = node.replay_cost_ms(false);
    return may_be_in_place ? std::min(fresh, node.replay_cost_ms(true)) : fresh;
  }

  // m_{y,s} as an expression.
  Linear replayed_by(int64_t y, int64_t s) const {
    if (!droppable(y)) return constant(0);
    if (s >= first_read_[y]) return drop_[y];
    const auto& steps = changes_[y];
    auto it = std::upper_bound(steps.begin(), steps.end(), s);
    if (it == steps.begin()) return constant(0);
    const size_t k = static_cast<size_t>(it - steps.begin()) - 1;
    return replay_col_[y][k] < 0 ? drop_[y] : Linear::column(replay_col_[y][k]);
  }

  void units() {
    unit_of_.assign(static_cast<size_t>(n_), -1);
    std::vector<int64_t> outside_unit(g_.outside_inputs.size(), -1);
    for (size_t e = 0; e < g_.outside_inputs.size(); ++e) {
      const OutsideInputProfile& in = g_.outside_inputs[e];
      outside_unit[e] = static_cast<int64_t>(units_.size());
      Unit unit{.bytes = in.bytes, .outside = true, .holders = {}};
      unit.holders.push_back({.kind = Holder::kCaller, .member = -1, .node = -1, .from = in.made_at - 1,
                              .to = in.released_at});
      units_.push_back(std::move(unit));
    }
    // The unit an input of node v is held in, and the member it goes through.
    auto input_unit = [&](int64_t v, size_t i) -> std::pair<int64_t, int64_t> {
      const NodeProfile& node = g_.nodes[v];
      const int64_t p = node.inputs[i];
      if (p >= 0) return {unit_of_[p], p};
      return {node.outside[i] >= 0 ? outside_unit[static_cast<size_t>(node.outside[i])] : -1, -1};
    };
    for (int64_t v = 0; v < n_; ++v) {
      const NodeProfile& node = g_.nodes[v];
      if (node.view_of >= 0) {
        unit_of_[v] = input_unit(v, static_cast<size_t>(node.view_of)).first;
      } else if (node.output_bytes > 0) {
        unit_of_[v] = static_cast<int64_t>(units_.size());
        units_.push_back({.bytes = node.output_bytes, .outside = false, .owner = v, .holders = {}});
      }
      if (unit_of_[v] >= 0) {
        units_[unit_of_[v]].holders.push_back({.kind = Holder::kCaller, .member = v, .node = v, .from = v,
                                               .to = v == n_ - 1 ? n_ + 1 : node.released_at,
                                               .in_backward = v == n_ - 1});
      }
      for (size_t k = 0; k < node.saved.size(); ++k) {
        const int slot = node.saved[k];
        std::pair<int64_t, int64_t> held{-1, -1};
        if (slot == kSavedOutput) held = {unit_of_[v], v};
        if (slot >= 0) held = input_unit(v, static_cast<size_t>(slot));
        if (held.first >= 0) {
          units_[held.first].holders.push_back({.kind = Holder::kSave, .member = held.second, .node = v,
                                                .index = static_cast<int>(k)});
        }
      }
      if (droppable(v)) {
        for (size_t i = 0; i < node.inputs.size(); ++i) {
          const auto held = input_unit(v, i);
          if (held.first >= 0) {
            units_[held.first].holders.push_back({.kind = Holder::kReplay, .member = held.second, .node = v});
          }
        }
      }
    }
  }

  bool active(const Holder& h, const Point& p) const {
    if (!p.backward) {
      if (h.kind == Holder::kCaller) return h.from < p.at && p.at < h.to;
      return h.node < p.at;
    }
    if (h.kind == Holder::kCaller) return h.in_backward;
    const int64_t at = pos_[h.node];
    if (h.kind == Holder::kReplay) return at >= p.at;
    return at > p.at || (at == p.at && !(p.excluded_node == h.node && p.excluded_index == h.index));
  }

  // At least each of `terms` (each at most 1): a column where it takes one.
  Linear either(std::vector<Linear> terms, bool certain) {
    if (certain) return constant(1);
    std::erase_if(terms, [](const Linear& t) { return t.max() <= 1e-12; });
    for (const Linear& t : terms) {
      if (t.min() >= 1 - 1e-12) return constant(1);
    }
    if (terms.empty()) return constant(0);
    std::sort(terms.begin(), terms.end(), [](const Linear& a, const Linear& b) {
      return std::tie(a.constant, a.terms) < std::tie(b.constant, b.terms);
    });
    terms.erase(std::unique(terms.begin(), terms.end(),
                            [](const Linear& a, const Linear& b) {
                              return a.constant == b.constant && a.terms == b.terms;
                            }),
                terms.end());
    if (terms.size() == 1 && terms[0].min() >= 0) return terms[0];
    std::vector<double> key;
    for (const Linear& t : terms) {
      key.push_back(t.constant);
      key.push_back(static_cast<double>(t.terms.size()));
      for (const auto& [col, coef] : t.terms) {
        key.push_back(col);
        key.push_back(coef);
      }
    }
    auto [it, fresh] = either_.try_emplace(key, -1);
    if (fresh) {
      it->second = program_.column(0, 1, false);
      for (const Linear& t : terms) program_.at_least(Linear::column(it->second) - t, 0);
    }
    return Linear::column(it->second);
  }

  // The bytes of unit u alive at p: its first storage (the forward output,
  // or the outside input) and, for a dropped owner, its rebuilt one.
  Linear alive(const Unit& u, const Point& p) {
    std::vector<Linear> first, rebuilt;
    bool certain = false;
    // A rebuilt value of member y is held (term `held`): the owner's rebuilt
    // storage, or, for a view of a kept owner (a dropped view in a region),
    // the owner's forward one (simulate.cpp, rebuild: a view's value is its
    // argument's).
    auto hold_rebuilt = [&](int64_t y, const Linear& held) {
      if (y == u.owner) {
        rebuilt.push_back(held);
        return;
      }
      first.push_back(u.owner >= 0 ? held - drop_[u.owner] : held);
      if (droppable(u.owner)) rebuilt.push_back(held + drop_[u.owner] - constant(1));
    };
    for (const Holder& h : u.holders) {
      if (!active(h, p)) continue;
      const int64_t y = h.member;
      switch (h.kind) {
        case Holder::kCaller:
          certain = true;
          break;
        case Holder::kSave:
          if (y < 0) {
            certain = true;
          } else {
            first.push_back(kept(y));
            if (p.backward && droppable(y)) hold_rebuilt(y, replayed_by(y, p.at));
          }
          break;
        case Holder::kReplay: {
          const Linear waiting = p.backward ? drop_[h.node] - replayed_by(h.node, p.at) : drop_[h.node];
          if (y < 0) {
            first.push_back(waiting);
          } else {
            first.push_back(waiting - drop_[y]);
            if (p.backward && droppable(y)) hold_rebuilt(y, replayed_by(y, p.at) + waiting - constant(1));
          }
          break;
        }
      }
    }
    Linear bytes = static_cast<double>(u.bytes) * either(std::move(first), certain);
    if (!u.outside) bytes = bytes + static_cast<double>(u.bytes) * either(std::move(rebuilt), false);
    return bytes;
  }

  void add_point(const Point& p) {
    Linear level = constant(p.constant);
    for (const Unit& u : units_) {
      const Linear part = alive(u, p);
      level.constant += part.constant;
      level.terms.insert(level.terms.end(), part.terms.begin(), part.terms.end());
    }
    level.normalize();
    if (level.is_constant()) {
      if (level.constant > static_cast<double>(target_)) constant_over_ = true;
      return;
    }
    program_.at_most((1.0 / search::kMiB) * level, static_cast<double>(target_) / search::kMiB);
  }


  void rows() {
    double sides = 0;
    for (int64_t t = 0; t < n_; ++t) {
      add_point({.backward = false, .at = t, .constant = sides + static_cast<double>(g_.nodes[t].forward_peak_bytes)});
      sides += static_cast<double>(g_.nodes[t].side_bytes);
    }
    // Side results go at their node's step (those of nodes never reached stay).
    std::vector<double> side_at(order_.size() + 1, 0);
    for (int64_t v = 0; v < n_; ++v) {
      if (pos_[v] < kNever) side_at[static_cast<size_t>(pos_[v])] += static_cast<double>(g_.nodes[v].side_bytes);
    }
    for (size_t s = 0; s < order_.size(); ++s) {
      const int64_t v = order_[s];
      const NodeProfile& node = g_.nodes[v];
      if (has_grad_[v]) {
        const double base = static_cast<double>(grad_live_[v]) + sides;
        add_point({.backward = true, .at = static_cast<int64_t>(s),
                   .constant = base + static_cast<double>(node.backward_peak_bytes)});
        if (node.released_early >= 0) {
          add_point({.backward = true, .at = static_cast<int64_t>(s), .excluded_node = v,
                     .excluded_index = node.released_early,
                     .constant = base + static_cast<double>(node.backward_late_peak_bytes)});
        }
      }
      sides -= side_at[s];
    }
  }

 public:
  // A row of constants only above the target: no plan fits.
  bool hopeless() const { return constant_over_; }

 private:
  const search::Context& c_;
  const GraphProfile& g_;
  int64_t n_;
  int64_t target_;
  Program program_;
  std::vector<Linear> drop_;
  std::vector<int64_t> taggable_;
  std::vector<int> decision_col_;
  std::vector<int64_t> order_, pos_, grad_live_;
  std::vector<bool> has_grad_;
  std::vector<int64_t> first_read_;
  std::vector<std::vector<int64_t>> consumers_, changes_;
  std::vector<std::vector<int>> replay_col_;
  std::vector<int64_t> unit_of_;
  std::vector<Unit> units_;
  std::map<std::vector<double>, int> either_;
  double cost_constant_ = 0, total_price_ = 0, scale_ = 1;
  bool constant_over_ = false;
};

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

}  // namespace

std::optional<MilpSolution> solve_milp(const search::Context& c, int64_t target, double time_limit_s,
                                       std::string* status_out) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  if (c.graph.nodes.empty()) return MilpSolution{{}, {.status = "optimal"}};

  Formulation f(c, target);
  Program& program = f.program();
  const auto& decision = f.decision_columns();

  std::optional<MilpSolution> best;
  double best_ms = std::numeric_limits<double>::infinity();
  std::set<std::vector<bool>> checked;
  std::vector<Row> cuts;
  // Every plan checked is cut off: it fits and is best known, or it does not.
  auto check = [&](const std::vector<Tag>& tags) {
    std::vector<bool> key;
    for (size_t i = 0; i < decision.size(); ++i) key.push_back(tags[f.taggable_nodes()[i]] == Tag::Recompute);
    if (!checked.insert(key).second) return;
    Row cut;  // sum of the kept ones' d + sum of the dropped ones' (1 - d) >= 1
    double ones = 0;
    for (size_t i = 0; i < key.size(); ++i) {
      cut.terms.push_back({decision[i], key[i] ? -1.0 : 1.0});
      ones += key[i] ? 1 : 0;
    }
    cut.lower = 1 - ones;
    cuts.push_back(std::move(cut));
    try {
      const Simulation sim = c.simulate(tags);
      if (sim.peak_bytes <= target && sim.recompute_ms < best_ms) {
        best_ms = sim.recompute_ms;
        best = MilpSolution{tags, {}};
      }
    } catch (const Error&) {  // a plan the engine could not run fits no budget
    }
  };
  // The other policies' plans (policies::pooled_plans) start the incumbent
  // (the program then looks for cheaper ones).
  {
    std::vector<Tag> keep_all(static_cast<size_t>(c.graph.size()), Tag::Keep);
    check(c.with_forced(keep_all));
    for (const search::Candidate& candidate : policies::pooled_plans(c)) {
      if (candidate.sim.peak_bytes > target) continue;
      std::vector<Tag> tags = keep_all;
      for (int64_t v : f.taggable_nodes()) tags[v] = candidate.tags[v];
      check(c.with_forced(tags));
    }
  }

  SolverReport report;
  report.bound_ms = f.cost_constant();
  bool proven = f.hopeless() || decision.empty();
  if (proven) report.bound_ms = best_ms;
  std::string status = proven ? "optimal" : "time limit";
  while (!proven) {
    const double remaining = time_limit_s - elapsed();
    if (remaining <= std::min(1.0, 0.05 * time_limit_s)) break;  // too little time to prove anything
    std::vector<Row> rows = program.rows;
    rows.insert(rows.end(), cuts.begin(), cuts.end());
    if (best) {  // only cheaper plans
      Row cheaper;
      for (size_t j = 0; j < program.objective.size(); ++j) {
        if (program.objective[j] != 0) cheaper.terms.push_back({static_cast<int>(j), program.objective[j]});
      }
      cheaper.upper = f.scale() * (best_ms - f.cost_constant()) - 1e-6;
      rows.push_back(std::move(cheaper));
    }
    const cbc::Outcome outcome = cbc::solve(column_major(program, rows), remaining);
    ++report.solves;
    report.variables = static_cast<int64_t>(program.lower.size());
    report.constraints = static_cast<int64_t>(rows.size());
    if (!outcome.retried.empty()) report.note = outcome.retried;
    // Check what CBC found: its saved solutions and its best.
    for (const std::vector<double>& x : outcome.solutions) check(f.tags_of(x.data()));
    if (outcome.failed) {  // the incumbent stands, unproven (Note [CBC in a child process])
      status = outcome.status;
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
  if (!best) {
    if (status_out) *status_out = status;
    return std::nullopt;
  }
  report.objective_ms = best_ms;
  report.bound_ms = std::min(report.bound_ms, best_ms);
  report.gap = best_ms > 0 ? (best_ms - report.bound_ms) / best_ms : 0;
  best->report = report;
  return best;
}

namespace policies {

// The solver's plan, or where it found none within its time, the fastest
// least-memory plan that fits, with what the solver said.
Answer plan_milp(const Request& request) {
  const search::Context& c = request.c;
  if (!request.budget) {
    return {.tags = search::all(c, Tag::Keep), .detail = "no budget: nothing to trade, every value kept",
            .chosen_by = "milp"};
  }
  std::string status;
  const std::optional<MilpSolution> solution = solve_milp(c, request.target, request.time_limit_s, &status);
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
          .detail = fmt::format("milp: {} over every tag, {:.3f} ms (bound {:.3f}, gap {:.2f}%) in {:.2f} s "
                                "(limit {:g} s), {} variables, {} constraints, {} solves",
                                r.status, r.objective_ms, r.bound_ms, 100 * r.gap, r.solve_seconds,
                                request.time_limit_s, r.variables, r.constraints, r.solves) +
                    (r.note.empty() ? "" : "; " + r.note),
          .chosen_by = "milp",
          .solver = r};
}

}  // namespace policies
}  // namespace remat::scheduler
