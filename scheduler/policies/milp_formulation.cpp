// The milp policy's formulation; see milp_formulation.h and its Note [The
// milp relaxation]. Each step below builds one kind of column or row, in
// the constructor's order.
#include "scheduler/policies/milp_formulation.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <set>
#include <tuple>
#include <utility>

namespace remat::scheduler::milp {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max() / 4;

// The gradient buffers of the executor's walk (simulate.cpp, backward()):
// each made with one reference and freed when its last one goes.
struct GradientBuffers {
  std::vector<int64_t> bytes;
  std::vector<int> refs;
  int64_t live = 0;

  int make(int64_t b) {
    bytes.push_back(b);
    refs.push_back(1);
    live += b;
    return static_cast<int>(bytes.size() - 1);
  }
  void ref(int s) {
    if (s >= 0) ++refs[s];
  }
  void unref(int s) {
    if (s >= 0 && --refs[s] == 0) live -= bytes[s];
  }
};

}  // namespace

Formulation::Formulation(const search::Context& c, int64_t target, const std::vector<int64_t>* twin_of)
    : c_(c), g_(c.graph), n_(c.graph.size()), target_(target) {
  decide(twin_of);
  backward_order();
  replays();
  objective();
  units();
  rows(twin_of);
}

std::vector<Tag> Formulation::tags_of(const double* x) const {
  std::vector<Tag> tags(static_cast<size_t>(n_), Tag::Keep);
  for (size_t i = 0; i < taggable_.size(); ++i) {
    if (x[decision_col_[i]] > 0.5) tags[static_cast<size_t>(taggable_[i])] = Tag::Recompute;
  }
  return c_.with_forced(std::move(tags));
}

// d_v: the drop of each node, a column for the taggable ones (a twin's
// column where it has a taggable twin).
void Formulation::decide(const std::vector<int64_t>* twin_of) {
  drop_.assign(static_cast<size_t>(n_), constant(0));
  std::vector<int> column_of(static_cast<size_t>(n_), -1);
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
      const int64_t twin = twin_of ? (*twin_of)[v] : -1;
      taggable_.push_back(v);
      column_of[v] = twin >= 0 && column_of[twin] >= 0 ? column_of[twin] : program_.column(0, 1, true);
      decision_col_.push_back(column_of[v]);
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

// The executor's order (simulate.cpp, backward()), which no tag changes,
// and the gradient bytes live at each step's peak.
void Formulation::backward_order() {
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
  GradientBuffers buffers;
  pos_.assign(static_cast<size_t>(n_), kNever);
  has_grad_.assign(static_cast<size_t>(n_), false);
  grad_live_.assign(static_cast<size_t>(n_), 0);
  std::vector<int> buffer(static_cast<size_t>(total), -1);
  const int64_t root = n_ - 1;
  buffer[root] = buffers.make(g_.nodes[root].dense_output_bytes());
  std::priority_queue<int64_t> ready;
  ready.push(root);
  while (!ready.empty()) {
    const int64_t v = ready.top();
    ready.pop();
    if (v >= n_) {
      buffers.unref(buffer[v]);
      buffer[v] = -1;
      continue;
    }
    const NodeProfile& node = g_.nodes[v];
    pos_[v] = static_cast<int64_t>(order_.size());
    order_.push_back(v);
    has_grad_[v] = buffer[v] >= 0;
    grad_live_[v] = buffers.live;
    std::vector<int> grads(node.inputs.size(), -1);
    if (has_grad_[v]) {
      for (size_t i = 0; i < grads.size(); ++i) {
        const int64_t b = i < node.grad_bytes.size() ? node.grad_bytes[i] : kNoGradient;
        if (b == kGradientAliasesOutput) {
          grads[i] = buffer[v];
          buffers.ref(grads[i]);
        } else if (b >= 0) {
          grads[i] = buffers.make(b);
        }
      }
      buffers.unref(buffer[v]);
      buffer[v] = -1;
    }
    for (size_t i = 0; i < grads.size(); ++i) {
      const int64_t t = target(v, i);
      if (t < 0) {
        buffers.unref(grads[i]);
        continue;
      }
      if (grads[i] >= 0) {
        if (buffer[t] < 0) {
          buffer[t] = grads[i];
        } else {
          const int sum = buffers.make(numel(node.input_shapes[i]) * dtype_size(node.input_dtypes[i]));
          buffers.unref(buffer[t]);
          buffers.unref(grads[i]);
          buffer[t] = sum;
        }
      }
      if (--dependencies[t] == 0) ready.push(t);
    }
  }
}

// The source a saved slot of node v reads (a node), or -1.
int64_t Formulation::source(int64_t v, int slot) const {
  if (slot == kSavedOutput) return v;
  return slot >= 0 ? g_.nodes[v].inputs[static_cast<size_t>(slot)] : -1;
}

// m_{y,s}: columns at the steps where a demand can first reach y, the rows
// that fix them, and the objective.
void Formulation::replays() {
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
}

// The cost: each replay once, at the cheaper price where it may run in place.
void Formulation::objective() {
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

double Formulation::price(int64_t y) const {
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
Linear Formulation::replayed_by(int64_t y, int64_t s) const {
  if (!droppable(y)) return constant(0);
  if (s >= first_read_[y]) return drop_[y];
  const auto& steps = changes_[y];
  auto it = std::upper_bound(steps.begin(), steps.end(), s);
  if (it == steps.begin()) return constant(0);
  const size_t k = static_cast<size_t>(it - steps.begin()) - 1;
  return replay_col_[y][k] < 0 ? drop_[y] : Linear::column(replay_col_[y][k]);
}

void Formulation::units() {
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

bool Formulation::active(const Holder& h, const Point& p) const {
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
Linear Formulation::either(std::vector<Linear> terms, bool certain) {
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
Linear Formulation::alive(const Unit& u, const Point& p) {
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

void Formulation::add_point(const Point& p) {
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

// Note [Repeated blocks solved once] (milp.cpp): where twins share their
// tags, a point in a block is as high, give or take the bytes of gradients
// and side results, as its twin's point in a later block, which holds more
// blocks' values: only the last twin's points have rows. Leaving rows out
// keeps the program a relaxation (Note [The milp relaxation]); a plan it
// proposes over the target at a point left out is cut off like any other.
void Formulation::rows(const std::vector<int64_t>* twin_of) {
  std::vector<bool> row_at(static_cast<size_t>(n_), true);
  if (twin_of) {
    std::vector<int64_t> last(static_cast<size_t>(n_), -1);  // per first twin: its last twin
    for (int64_t v = 0; v < n_; ++v) last[(*twin_of)[v] >= 0 ? (*twin_of)[v] : v] = v;
    for (int64_t v = 0; v < n_; ++v) row_at[v] = last[(*twin_of)[v] >= 0 ? (*twin_of)[v] : v] == v;
  }
  double sides = 0;
  for (int64_t t = 0; t < n_; ++t) {
    if (row_at[t]) {
      add_point({.backward = false, .at = t, .constant = sides + static_cast<double>(g_.nodes[t].forward_peak_bytes)});
    }
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
    if (has_grad_[v] && row_at[v]) {
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
}  // namespace remat::scheduler::milp
