// The `milp` policy's formulation (milp.h): the taggable nodes' keep/drop
// choices and the simulator's memory levels as a mixed-integer program
// (milp_program.h) that relaxes scheduler::simulate; milp.cpp solves it.
// Internal to the milp policy.
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
// in cbc.h), keeping the best plan checked so far.#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "scheduler/policies/milp_program.h"
#include "scheduler/search.h"

namespace remat::scheduler::milp {

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
  // The program for plans whose peak is at most `target` bytes. With
  // `twin_of` (RepeatedBlocks::twin_of, scheduler/repeated_blocks.h), a
  // node with a twin takes its twin's drop column: one block's decisions
  // for every block identical to it (Note [Repeated blocks solved once] in
  // milp.cpp), a restriction of the space the program covers; and only the
  // last twin's points have rows (the program is weaker, never wrong).
  Formulation(const search::Context& c, int64_t target, const std::vector<int64_t>* twin_of = nullptr);

  Program& program() { return program_; }
  const std::vector<int64_t>& taggable_nodes() const { return taggable_; }
  // Per taggable node, its drop column (shared by twins).
  const std::vector<int>& decision_columns() const { return decision_col_; }
  // The tags of a solution x (one value per column), rules applied.
  std::vector<Tag> tags_of(const double* x) const;
  // objective = scale() * (cost in ms - cost_constant()): CBC's tolerances
  // are absolute, so the objective is scaled to about 1000.
  double scale() const { return scale_; }
  double cost_constant() const { return cost_constant_; }
  // A row of constants only above the target: no plan fits.
  bool hopeless() const { return constant_over_; }

 private:
  void decide(const std::vector<int64_t>* twin_of);
  void backward_order();
  void replays();
  void objective();
  void units();
  void rows(const std::vector<int64_t>* twin_of);

  bool droppable(int64_t v) const { return v >= 0 && drop_[v].max() > 0; }
  Linear kept(int64_t v) const { return constant(1) - drop_[v]; }
  int64_t source(int64_t v, int slot) const;
  double price(int64_t y) const;
  Linear replayed_by(int64_t y, int64_t s) const;
  bool active(const Holder& h, const Point& p) const;
  Linear either(std::vector<Linear> terms, bool certain);
  Linear alive(const Unit& u, const Point& p);
  void add_point(const Point& p);

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

}  // namespace remat::scheduler::milp
