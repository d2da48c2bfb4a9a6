// The liveness simulator; see simulate.h.
#include "scheduler/simulate.h"

#include <algorithm>
#include <queue>

#include "engine/error.h"

namespace remat::scheduler {
namespace {

constexpr int kNoStorage = -1;

class Simulator {
 public:
  Simulator(const GraphProfile& graph, std::vector<Tag> tags)
      : graph_(graph),
        tags_(std::move(tags)),
        n_(graph.size()),
        storage_(n_, kNoStorage),
        rebuilt_(n_, kNoStorage),
        side_(n_, kNoStorage),
        pending_(n_, 0),
        replay_held_(n_, false),
        released_early_(n_, -1),
        outside_(graph.outside_inputs.size(), kNoStorage) {}

  Simulation run() {
    result_.level_before_forward.assign(n_, 0);
    result_.forward_peak_at.assign(n_, 0);
    result_.backward_peak_at.assign(n_, 0);
    result_.replayed.assign(n_, false);
    result_.replay_ms.assign(n_, 0.0);
    result_.replayed_in_place.assign(n_, false);
    forward();
    result_.saved_bytes_after_forward = live_;
    backward();
    result_.peak_bytes = peak_;
    return std::move(result_);
  }

 private:
  bool dropped(int64_t v) const { return v >= 0 && tags_[v] == Tag::Recompute; }

  int new_storage(int64_t bytes) {
    bytes_.push_back(bytes);
    refs_.push_back(1);
    live_ += bytes;
    note_peak(live_);
    return static_cast<int>(bytes_.size() - 1);
  }
  void ref(int s) {
    if (s != kNoStorage) ++refs_[s];
  }
  void unref(int s) {
    if (s == kNoStorage) return;
    REMAT_CHECK(refs_[s] > 0, "simulate: storage {} released twice", s);
    if (--refs_[s] == 0) live_ -= bytes_[s];
  }
  void note_peak(int64_t bytes) { peak_ = std::max(peak_, bytes); }

  // The storage holding v's value now (the rebuilt one for a dropped node).
  int value_storage(int64_t v) const {
    if (v < 0) return kNoStorage;
    return dropped(v) ? rebuilt_[v] : storage_[v];
  }

  // A SavedValue of node v's output made now: a use of v if v is dropped,
  // else a reference to its storage.
  void hold(int64_t v) {
    if (v < 0) return;
    if (dropped(v)) {
      ++pending_[v];
    } else {
      ref(storage_[v]);
    }
  }
  void let_go(int64_t v) {
    if (v < 0) return;
    if (dropped(v)) {
      drop_use(v);
    } else {
      unref(storage_[v]);
    }
  }
  // The storage of node v's input i when it is an input from outside the
  // graph made during the step, else kNoStorage.
  int outside_storage(int64_t v, size_t i) const {
    const int64_t e = graph_.nodes[v].outside[i];
    return e < 0 ? kNoStorage : outside_[e];
  }
  // The storage holding node v's input i now: a dropped producer's rebuilt
  // value (storage_of_input, below, is forward's: the producer's own).
  int input_storage(int64_t v, size_t i) const {
    const int64_t producer = graph_.nodes[v].inputs[i];
    return producer >= 0 ? value_storage(producer) : outside_storage(v, i);
  }
  // A SavedValue (or replay input) of node v's input i made now, and let go.
  void hold_input(int64_t v, size_t i) {
    hold(graph_.nodes[v].inputs[i]);
    ref(outside_storage(v, i));
  }
  void let_go_input(int64_t v, size_t i) {
    let_go(graph_.nodes[v].inputs[i]);
    unref(outside_storage(v, i));
  }
  void drop_use(int64_t v) {
    if (--pending_[v] > 0) return;
    unref(rebuilt_[v]);  // replay inputs go when the replay ran, or with the node's own saved values
    rebuilt_[v] = kNoStorage;
  }
  void release_replay_inputs(int64_t v) {
    if (!replay_held_[v]) return;
    replay_held_[v] = false;
    for (size_t i = 0; i < graph_.nodes[v].inputs.size(); ++i) let_go_input(v, i);
  }

  void forward() {
    std::vector<std::vector<int64_t>> released_before(n_ + 1);
    for (int64_t v = 0; v < n_; ++v) released_before[graph_.nodes[v].released_at].push_back(v);
    // Inputs from outside the graph: allocated between two nodes, and held
    // by the caller until a later gap (engine/record.h, Note [Inputs from
    // outside the graph]). In one gap the caller lets go first, then
    // allocates: `h = f(h); h = g(h, 0.5)` frees before it makes 0.5.
    std::vector<std::vector<int64_t>> made_before(n_), outside_released_before(n_ + 1);
    for (size_t e = 0; e < graph_.outside_inputs.size(); ++e) {
      made_before[graph_.outside_inputs[e].made_at].push_back(static_cast<int64_t>(e));
      outside_released_before[graph_.outside_inputs[e].released_at].push_back(static_cast<int64_t>(e));
    }
    // A checkpoint region's node is recorded dropped, holding its replay
    // inputs, and the first node outside the region to read it promotes it
    // to Keep as that reader is recorded, after its forward ran
    // (engine/autograd.cpp, Node::promote_to_keep): the inputs stay held
    // through that forward. (A plan cannot tag such a node Recompute: the
    // engine keeps it whatever the tag, and forced_tags says so. Promotions
    // by a policy's keep_input, under blocks' profiling step, are not
    // modelled here.)
    std::vector<std::vector<int64_t>> promoted_by(n_);
    std::vector<bool> promoted(n_, false);
    for (int64_t v = 0; v < n_; ++v) {
      for (int64_t input : graph_.nodes[v].inputs) {
        if (input < 0 || promoted[input] || dropped(input)) continue;
        const uint64_t region = graph_.nodes[input].region;
        if (region == 0 || region == graph_.nodes[v].region) continue;
        promoted[input] = true;
        promoted_by[v].push_back(input);
      }
    }
    for (int64_t v = 0; v < n_; ++v) {
      for (int64_t u : released_before[v]) unref(storage_[u]);  // the caller's handle
      for (int64_t e : outside_released_before[v]) unref(outside_[e]);
      for (int64_t e : made_before[v]) outside_[e] = new_storage(graph_.outside_inputs[e].bytes);
      const NodeProfile& node = graph_.nodes[v];
      result_.level_before_forward[v] = live_;
      result_.forward_peak_at[v] = live_ + node.forward_peak_bytes;
      note_peak(live_ + node.forward_peak_bytes);
      if (node.view_of >= 0) {
        storage_[v] = storage_of_input(v, node.view_of);
        ref(storage_[v]);
      } else {
        storage_[v] = new_storage(node.output_bytes);
      }
      for (int64_t u : promoted_by[v]) {
        for (size_t i = 0; i < graph_.nodes[u].inputs.size(); ++i) let_go_input(u, i);
      }
      save(v);
      if (dropped(v)) {
        replay_held_[v] = true;
        for (size_t i = 0; i < node.inputs.size(); ++i) hold_input(v, i);
      } else if (promoted[v]) {  // held until its reader outside the region (promoted_by) is recorded
        for (size_t i = 0; i < node.inputs.size(); ++i) hold_input(v, i);
      }
    }
    // The caller lets go of everything but the root once forward returns.
    for (int64_t u : released_before[n_]) {
      if (u != n_ - 1) unref(storage_[u]);
    }
    for (int64_t e : outside_released_before[n_]) unref(outside_[e]);
  }

  int storage_of_input(int64_t v, int i) const {
    const int64_t producer = graph_.nodes[v].inputs[i];
    return producer < 0 ? outside_storage(v, static_cast<size_t>(i)) : storage_[producer];
  }

  void save(int64_t v) {
    const NodeProfile& node = graph_.nodes[v];
    if (node.side_bytes > 0) side_[v] = new_storage(node.side_bytes);
    for (int slot : node.saved) {
      if (slot == kSavedOutput) hold(v);
      if (slot >= 0) hold_input(v, static_cast<size_t>(slot));
    }
  }

  // Saved value `index` of node v (an index into NodeProfile::saved) goes.
  void let_go_saved(int64_t v, int index) {
    const int slot = graph_.nodes[v].saved[static_cast<size_t>(index)];
    if (slot == kSavedOutput) let_go(v);
    if (slot >= 0) let_go_input(v, static_cast<size_t>(slot));
  }

  void release_saved(int64_t v) {
    const NodeProfile& node = graph_.nodes[v];
    for (size_t i = 0; i < node.saved.size(); ++i) {
      if (static_cast<int>(i) != released_early_[v]) let_go_saved(v, static_cast<int>(i));
    }
    unref(side_[v]);
    side_[v] = kNoStorage;
    release_replay_inputs(v);
  }

  void rebuild(int64_t v) {
    if (rebuilt_[v] != kNoStorage) return;
    const NodeProfile& node = graph_.nodes[v];
    REMAT_CHECK(replay_held_[v], "simulate: node {} ({}) is read after its replay inputs were released", v, node.op);
    for (int64_t input : node.inputs) {
      if (dropped(input)) rebuild(input);
    }
    // The replay's argument list holds the inputs while forward() runs; the
    // replay inputs go before it (Note [Replays in place]).
    std::vector<int> arguments;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      arguments.push_back(input_storage(v, i));
      ref(arguments.back());
    }
    release_replay_inputs(v);
    const int over = node.view_of >= 0 ? kNoStorage : overwritten_argument(v, arguments);
    const int64_t rise = node.forward_peak_bytes - (node.replay_reuses_side_results ? node.side_bytes : 0);
    if (node.view_of >= 0) {
      note_peak(live_ + rise);
      rebuilt_[v] = arguments[static_cast<size_t>(node.view_of)];
      ref(rebuilt_[v]);
    } else if (over != kNoStorage) {
      note_peak(live_ + rise - node.output_bytes);
      rebuilt_[v] = over;
      ref(over);
    } else {
      note_peak(live_ + rise);
      rebuilt_[v] = new_storage(node.output_bytes);
    }
    for (int s : arguments) unref(s);
    result_.replayed_nodes += 1;
    const bool in_place = over != kNoStorage;
    const double ms = node.replay_cost_ms(in_place);
    result_.recompute_ms += ms;
    result_.replayed[v] = true;
    result_.replay_ms[v] = ms;
    result_.replayed_in_place[v] = in_place;
    result_.recompute_flops += node.replay_flops;
  }

  // The storage a replay of v writes its output over, by the engine's rule
  // (replay_writes_over_input, engine/recompute.h); else kNoStorage.
  int overwritten_argument(int64_t v, const std::vector<int>& arguments) const {
    const NodeProfile& node = graph_.nodes[v];
    const int over = node.overwritable_input;
    if (over < 0 || static_cast<size_t>(over) >= arguments.size()) return kNoStorage;
    const auto i = static_cast<size_t>(over);
    const int64_t input = node.inputs[i];
    const int s = arguments[i];
    const bool from_graph = input >= 0 && s != kNoStorage;
    const bool held_alone_and_dense = from_graph && refs_[s] == 1 && graph_.nodes[input].output_dense;
    const bool same = node.input_shapes[i] == node.output_shape && node.input_dtypes[i] == node.output_dtype;
    return replay_writes_over_input(over, i, from_graph, held_alone_and_dense, same) ? s : kNoStorage;
  }

  // Where the gradient of node v's input i goes: its producer, a leaf's
  // accumulator (numbered after the nodes), or nowhere (-1).
  int64_t target(int64_t v, size_t i) const {
    const NodeProfile& node = graph_.nodes[v];
    if (node.inputs[i] >= 0) return node.inputs[i];
    return node.leaves[i] >= 0 ? n_ + node.leaves[i] : -1;
  }

  void backward() {
    // Nodes 0..n-1, then one gradient accumulator per leaf.
    const int64_t total = n_ + graph_.leaves;
    std::vector<int> dependencies(total, 0);
    for (int64_t v = 0; v < n_; ++v) {
      for (size_t i = 0; i < graph_.nodes[v].inputs.size(); ++i) {
        if (const int64_t t = target(v, i); t >= 0) ++dependencies[t];
      }
    }
    std::vector<int> buffer(total, kNoStorage);
    const int64_t root = n_ - 1;
    buffer[root] = new_storage(graph_.nodes[root].dense_output_bytes());
    // Latest first; accumulators (numbered after the nodes) before any node.
    std::priority_queue<int64_t> ready;
    ready.push(root);
    while (!ready.empty()) {
      const int64_t v = ready.top();
      ready.pop();
      if (v >= n_) {  // a leaf's accumulator takes the gradient out of the transient bytes
        unref(buffer[v]);
        buffer[v] = kNoStorage;
        continue;
      }
      const int64_t peak_before = peak_;
      peak_ = live_;  // to find this node's own peak; restored below
      const std::vector<int> grads = run_backward(v, buffer[v]);
      release_saved(v);
      pass_gradients(v, grads, buffer, dependencies, ready);
      result_.backward_peak_at[v] = peak_;
      peak_ = std::max(peak_, peak_before);
    }
  }

  // Node v's backward, given its incoming gradient (kNoStorage: none, and
  // then it does nothing): its saved values rebuilt, its peaks noted, the
  // gradients of its inputs made; the incoming one is let go of.
  std::vector<int> run_backward(int64_t v, int& incoming) {
    const NodeProfile& node = graph_.nodes[v];
    std::vector<int> grads(node.inputs.size(), kNoStorage);
    if (incoming == kNoStorage) return grads;
    for (int slot : node.saved) {
      const int64_t source = slot == kSavedOutput ? v : slot >= 0 ? node.inputs[slot] : -1;
      if (dropped(source)) rebuild(source);
    }
    const int64_t before = live_;
    note_peak(before + node.backward_peak_bytes);
    if (node.released_early >= 0) {  // the rest runs without that value, if it was the last reference
      released_early_[v] = node.released_early;
      let_go_saved(v, node.released_early);
      note_peak(before + node.backward_late_peak_bytes - (before - live_));
    }
    for (size_t i = 0; i < grads.size(); ++i) {
      const int64_t bytes = i < node.grad_bytes.size() ? node.grad_bytes[i] : kNoGradient;
      if (bytes == kGradientAliasesOutput) {
        grads[i] = incoming;
        ref(grads[i]);
      } else if (bytes >= 0) {
        grads[i] = new_storage(bytes);
      }
    }
    unref(incoming);
    incoming = kNoStorage;
    return grads;
  }

  // Node v's input gradients handed on: each to its target's buffer (added
  // to what is there into a new sum), a target ready once all its consumers ran.
  void pass_gradients(int64_t v, const std::vector<int>& grads, std::vector<int>& buffer,
                      std::vector<int>& dependencies, std::priority_queue<int64_t>& ready) {
    const NodeProfile& node = graph_.nodes[v];
    for (size_t i = 0; i < grads.size(); ++i) {
      const int64_t t = target(v, i);
      if (t < 0) {  // a gradient for an input that needs none (a view of the incoming one, say)
        unref(grads[i]);
        continue;
      }
      if (grads[i] != kNoStorage) {
        if (buffer[t] == kNoStorage) {
          buffer[t] = grads[i];
        } else {  // a new sum of the input's shape, then both parts go
          const int64_t bytes = numel(node.input_shapes[i]) * dtype_size(node.input_dtypes[i]);
          const int sum = new_storage(bytes);
          unref(buffer[t]);
          unref(grads[i]);
          buffer[t] = sum;
        }
      }
      if (--dependencies[t] == 0) ready.push(t);
    }
  }

  const GraphProfile& graph_;
  std::vector<Tag> tags_;
  int64_t n_;
  std::vector<int64_t> bytes_;  // per storage
  std::vector<int> refs_;
  int64_t live_ = 0, peak_ = 0;
  std::vector<int> storage_;  // per node: its forward output's storage
  std::vector<int> rebuilt_;  // per node: its rebuilt output's storage
  std::vector<int> side_;     // per node: its side results' storage
  std::vector<int> pending_;  // per node: saved values that read a dropped output
  std::vector<bool> replay_held_;
  std::vector<int> released_early_;  // per node: the saved value its backward let go of early, or -1
  std::vector<int> outside_;         // per input from outside the graph (GraphProfile::outside_inputs): its storage
  Simulation result_;
};

}  // namespace

std::vector<Tag> effective_tags(const GraphProfile& graph, std::vector<Tag> tags) {
  REMAT_CHECK(static_cast<int64_t>(tags.size()) == graph.size(), "simulate: {} tags for a graph of {} nodes",
              tags.size(), graph.size());
  // A checkpoint region's output read outside the region is promoted to
  // Keep by the engine as that read is recorded, a view included.
  std::vector<bool> leaves_region(graph.size(), false);
  for (const NodeProfile& node : graph.nodes) {
    for (int64_t input : node.inputs) {
      if (input >= 0 && graph.nodes[input].region != 0 && graph.nodes[input].region != node.region) {
        leaves_region[input] = true;
      }
    }
  }
  for (int64_t v = 0; v < graph.size(); ++v) {
    const NodeProfile& node = graph.nodes[v];
    if (node.view_of >= 0 && !leaves_region[v]) {
      const int64_t base = node.inputs[node.view_of];
      if (base >= 0 && tags[base] == Tag::Recompute) tags[v] = Tag::Recompute;
    }
  }
  return tags;
}

void reprice(const GraphProfile& graph, Simulation& sim) {
  if (graph.nodes.empty()) return;
  REMAT_CHECK(sim.replayed.size() == graph.nodes.size(), "simulate: repricing a simulation of {} nodes on a graph of {}",
              sim.replayed.size(), graph.nodes.size());
  sim.recompute_ms = 0;
  for (size_t v = 0; v < graph.nodes.size(); ++v) {
    sim.replay_ms[v] = sim.replayed[v] ? graph.nodes[v].replay_cost_ms(sim.replayed_in_place[v]) : 0.0;
    sim.recompute_ms += sim.replay_ms[v];
  }
}

Simulation simulate(const GraphProfile& graph, const std::vector<Tag>& tags) {
  if (graph.nodes.empty()) return {};
  const int64_t n = graph.size();
  for (int64_t v = 0; v < n; ++v) {
    const NodeProfile& node = graph.nodes[v];
    REMAT_CHECK(node.outside.size() == node.inputs.size(), "simulate: node {} ({}) has {} inputs but {} entries in "
                "outside (a profile not made by profile_graph?)", v, node.op, node.inputs.size(), node.outside.size());
  }
  for (const OutsideInputProfile& input : graph.outside_inputs) {
    REMAT_CHECK(input.made_at >= 0 && input.made_at < n && input.released_at >= input.made_at &&
                input.released_at <= n, "simulate: an input from outside the graph made at {} and released at {} "
                "in a graph of {} nodes", input.made_at, input.released_at, n);
  }
  return Simulator(graph, effective_tags(graph, tags)).run();
}

}  // namespace remat::scheduler
