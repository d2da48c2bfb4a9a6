// profile_graph and profile_records; see profile.h.
#include "scheduler/profile.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "engine/backward.h"
#include "engine/hash.h"
#include "scheduler/profiler.h"

namespace remat::scheduler {
namespace {

// FNV-1a over the bytes of a value (engine/hash.h).
void mix(uint64_t& hash, const void* data, size_t size) { fnv1a(hash, data, size); }

// Nodes of the same op on the same shapes and dtypes, with the same
// gradients and saved values (one layer repeated, as in a transformer's
// blocks) do the same work, yet one step's timer sees
// them differ by more than the planners' margins (a preempted op, a cold
// cache). Each gets the median of its group's forward and backward times,
// and of each kind of replay time over the members replayed so (every
// member then counts as timed), so that a plan does not follow the timer's
// noise from run to run.
void steady_repeated_times(GraphProfile& profile) {
  std::unordered_map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < profile.nodes.size(); ++i) {
    const NodeProfile& node = profile.nodes[i];
    std::string key = node.op;
    auto out = std::back_inserter(key);
    for (const Shape& s : node.input_shapes) fmt::format_to(out, "|{}", str(s));
    for (DType d : node.input_dtypes) fmt::format_to(out, "|{}", dtype_name(d));
    fmt::format_to(out, "->{}{}", str(node.output_shape), dtype_name(node.output_dtype));
    // The same work in backward too: which gradients it made, what it read.
    fmt::format_to(out, "{}", node.backward_ran ? "|backward" : "|no backward");
    for (int64_t bytes : node.grad_bytes) fmt::format_to(out, "|g{}", bytes);
    for (int slot : node.saved) fmt::format_to(out, "|s{}", slot);
    groups[key].push_back(i);
  }
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    std::vector<double> forward, backward, replay, in_place;
    for (size_t i : members) {
      const NodeProfile& node = profile.nodes[i];
      forward.push_back(node.forward_ms);
      backward.push_back(node.backward_ms);
      if (node.replay_ms > 0) replay.push_back(node.replay_ms);
      if (node.replay_in_place_ms > 0) in_place.push_back(node.replay_in_place_ms);
    }
    const double forward_median = median(forward), backward_median = median(backward);
    const double replay_median = replay.empty() ? 0.0 : median(replay);
    const double in_place_median = in_place.empty() ? 0.0 : median(in_place);
    for (size_t i : members) {
      profile.nodes[i].forward_ms = forward_median;
      profile.nodes[i].backward_ms = backward_median;
      profile.nodes[i].replay_ms = replay_median;
      profile.nodes[i].replay_in_place_ms = in_place_median;
    }
  }
}

// Of `records` (sorted by sequence_nr, the root last), those the root
// depends on, in the same order.
std::vector<const NodeRecord*> reached_from_root(const std::vector<const NodeRecord*>& records) {
  std::unordered_map<uint64_t, size_t> index_of;
  for (size_t i = 0; i < records.size(); ++i) index_of[records[i]->sequence_nr] = i;
  std::vector<bool> reached(records.size(), false);
  if (!records.empty()) reached.back() = true;
  for (size_t i = records.size(); i-- > 0;) {
    if (!reached[i]) continue;
    for (const InputSource& source : records[i]->inputs) {
      auto it = index_of.find(source.producer);
      if (it != index_of.end()) reached[it->second] = true;
    }
  }
  std::vector<const NodeRecord*> kept;
  for (size_t i = 0; i < records.size(); ++i) {
    if (reached[i]) kept.push_back(records[i]);
  }
  return kept;
}

// Rows for `records` (sorted here by sequence_nr, the root last), keeping
// only those the root depends on.
// `step_start`: the mark_sequence() taken as the step began, or kNone when
// the step is taken to begin at its first node.
// `measured_by`: what was measured of a record's node.
using MeasuresOf = std::function<NodeMeasures(const NodeRecord&)>;
GraphProfile build(std::vector<const NodeRecord*> records, uint64_t step_start, const MeasuresOf& measured_by) {
  std::sort(records.begin(), records.end(),
            [](const NodeRecord* a, const NodeRecord* b) { return a->sequence_nr < b->sequence_nr; });
  const std::vector<const NodeRecord*> kept = reached_from_root(records);
  GraphProfile profile;
  std::unordered_map<uint64_t, int64_t> position_of;
  std::unordered_map<const void*, int64_t> leaf_index;
  const int64_t n = static_cast<int64_t>(kept.size());
  // Where an event stamped next_sequence_nr() = s falls, as a position:
  // before the first node recorded at or after s; n if there is none
  // (kNone: it has not happened yet).
  auto position_from = [&](uint64_t s) {
    return std::partition_point(kept.begin(), kept.end(), [s](const NodeRecord* r) { return r->sequence_nr < s; }) -
           kept.begin();
  };
  // Inputs from outside the graph made during forward, one row per storage
  // (a handle and a view of it passed in are one input): an address and
  // its allocation stamp name a storage, since one freed after a node read
  // it and another allocated at its address have different stamps.
  std::map<std::pair<const void*, uint64_t>, int64_t> outside_index;
  auto outside_row = [&](const OutsideInput& input) -> int64_t {
    const int64_t made_at = position_from(input.made_before);
    // Made before the step began: in the level it starts from, as the batch is.
    if (made_at == 0 && (step_start == InputSource::kNone || input.made_before < step_start)) return -1;
    const int64_t released_at = position_from(input.released_before);
    const auto [it, added] =
        outside_index.try_emplace({input.storage, input.made_before}, profile.outside_inputs.size());
    if (added) {
      profile.outside_inputs.push_back({.bytes = input.bytes, .made_at = made_at, .released_at = released_at});
    } else {
      int64_t& released = profile.outside_inputs[static_cast<size_t>(it->second)].released_at;
      released = std::max(released, released_at);
    }
    return it->second;
  };
  for (int64_t p = 0; p < n; ++p) {
    const NodeRecord& r = *kept[p];
    position_of[r.sequence_nr] = p;
    NodeProfile row;
    row.position = p;
    row.recorded_index = std::lower_bound(records.begin(), records.end(), &r, [](const NodeRecord* a, const NodeRecord* b) {
                           return a->sequence_nr < b->sequence_nr;
                         }) - records.begin();
    static_cast<NodeFacts&>(row) = r;
    static_cast<NodeMeasures&>(row) = measured_by(r);
    row.block = r.block ? *r.block : std::string();
    row.module = r.module ? *r.module : std::string();
    for (const InputSource& source : r.inputs) {
      auto it = position_of.find(source.producer);
      row.inputs.push_back(it == position_of.end() ? -1 : it->second);
      if (source.leaf) {
        auto [leaf, added] = leaf_index.try_emplace(source.leaf, static_cast<int64_t>(leaf_index.size()));
        row.leaves.push_back(leaf->second);
      } else {
        row.leaves.push_back(-1);
      }
      row.outside.push_back(source.outside ? outside_row(*source.outside) : -1);
    }
    profile.nodes.push_back(std::move(row));
  }
  // When the caller let go of each output.
  for (int64_t p = 0; p < n; ++p) profile.nodes[p].released_at = position_from(kept[p]->output_released_before);
  profile.leaves = static_cast<int64_t>(leaf_index.size());
  profile.signature = signature_of(profile);
  name_nodes(profile);
  steady_repeated_times(profile);
  return profile;
}

}  // namespace

void name_nodes(GraphProfile& graph) {
  std::map<std::pair<std::string_view, std::string_view>, int64_t> seen;
  for (NodeProfile& node : graph.nodes) {
    const int64_t earlier = seen[{node.module, node.op}]++;
    node.name = earlier == 0 ? fmt::format("{}/{}", node.module, node.op)
                             : fmt::format("{}/{}#{}", node.module, node.op, earlier);
  }
}

uint64_t signature_of(const GraphProfile& graph) {
  uint64_t hash = kFnv1aOffsetBasis;
  // Sizes before contents, so that (2, 3), (4) and (2), (3, 4) differ.
  auto mix_shape = [&](const Shape& s) {
    const size_t rank = s.size();
    mix(hash, &rank, sizeof rank);
    mix(hash, s.data(), rank * sizeof(int64_t));
  };
  for (const NodeProfile& row : graph.nodes) {
    mix(hash, row.op.data(), row.op.size() + 1);  // with its terminating zero
    const size_t inputs = row.input_shapes.size();
    mix(hash, &inputs, sizeof inputs);
    for (const Shape& s : row.input_shapes) mix_shape(s);
    for (DType d : row.input_dtypes) mix(hash, &d, sizeof d);
    mix_shape(row.output_shape);
    mix(hash, &row.output_dtype, sizeof row.output_dtype);
    for (int64_t input : row.inputs) mix(hash, &input, sizeof input);
    const bool in_region = row.region != 0;  // region ids differ per call; being in one does not
    mix(hash, &in_region, sizeof in_region);
  }
  return hash;
}

double median(std::vector<double> values) {
  REMAT_CHECK(!values.empty(), "median: no values");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

MedianInterval median_interval(std::vector<double> values, double confidence) {
  REMAT_CHECK(!values.empty(), "median_interval: no values");
  REMAT_CHECK(confidence > 0 && confidence < 1, "median_interval: confidence must be in (0, 1), got {}", confidence);
  std::sort(values.begin(), values.end());
  const auto n = static_cast<int64_t>(values.size());
  // [x_r, x_(n+1-r)] misses the median only when r - 1 or fewer of the n
  // draws fall on one side of it: coverage 1 - 2 P(X <= r - 1) for
  // X ~ binomial(n, 1/2), in logs so that 2^-n does not underflow.
  const auto pmf = [n](int64_t i) {
    return std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) - n * std::log(2.0));
  };
  int64_t rank = 1;
  double tail = pmf(0);  // P(X <= rank - 1)
  while (rank + 1 <= (n + 1) / 2) {
    const double next = tail + pmf(rank);
    if (1 - 2 * next < confidence) break;
    tail = next;
    ++rank;
  }
  return {values[static_cast<size_t>(rank - 1)], values[static_cast<size_t>(n - rank)], 1 - 2 * tail};
}

double NodeProfile::replay_cost_ms(bool in_place) const {
  if (in_place && replay_in_place_ms > 0) return replay_in_place_ms;
  return replay_ms > 0 ? replay_ms : forward_ms;
}

int64_t NodeProfile::dense_output_bytes() const { return numel(output_shape) * dtype_size(output_dtype); }

double NodeProfile::ms_per_mib() const {
  if (output_bytes == 0) return std::numeric_limits<double>::infinity();
  return priced_replay_ms() / (static_cast<double>(output_bytes) / (1024.0 * 1024.0));
}

int64_t GraphProfile::total_output_bytes() const {
  int64_t total = 0;
  for (const NodeProfile& n : nodes) total += n.output_bytes;
  return total;
}

double GraphProfile::total_forward_ms() const {
  double total = 0;
  for (const NodeProfile& n : nodes) total += n.forward_ms;
  return total;
}

double GraphProfile::total_backward_ms() const {
  double total = 0;
  for (const NodeProfile& n : nodes) total += n.backward_ms;
  return total;
}

double GraphProfile::training_step_ms() const {
  const double graph_ms = total_forward_ms() + total_backward_ms();
  return step_ms > 0 ? std::clamp(step_ms, graph_ms, 1.5 * graph_ms) : graph_ms;
}

GraphProfile profile_graph(const Tensor& root) {
  REMAT_CHECK(root.defined() && root.grad_fn(), "profile_graph: tensor {} has no recorded graph", root.str());
  std::vector<const NodeRecord*> records;
  std::unordered_set<Node*> seen;
  std::unordered_set<Profiler*> profilers;
  std::vector<Node*> stack{root.grad_fn().get()};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    if (!node || !seen.insert(node).second || dynamic_cast<AccumulateGrad*>(node)) continue;
    bool observed = false;
    for (const std::shared_ptr<GraphObserver>& observer : node->observers()) {
      auto* profiler = dynamic_cast<Profiler*>(observer.get());
      if (profiler && profilers.insert(profiler).second) profiler->resolve();  // a GPU's times, once the work has run
      observed = observed || (profiler && profiler->measured(node->record()).observed);
    }
    REMAT_CHECK(observed, "profile_graph: node {} ({}) of the graph of {} was recorded unmeasured; record the graph "
                "inside a scheduler::Profiling scope (scheduler/profiler.h) or a Checkpointer's record()",
                node->record().sequence_nr, node->name(), root.str());
    records.push_back(&node->record());
    for (const Edge& edge : node->next_edges()) stack.push_back(edge.node.get());
  }
  // What the innermost Profiler listening to a node measured of it.
  std::unordered_map<const NodeRecord*, NodeMeasures> measured;
  for (Node* node : seen) {
    for (const std::shared_ptr<GraphObserver>& observer : node->observers()) {
      if (auto* profiler = dynamic_cast<Profiler*>(observer.get())) {
        const NodeMeasures m = profiler->measured(node->record());
        if (m.observed) measured[&node->record()] = m;
      }
    }
  }
  // The root is the latest record; sorting puts it last.
  return build(std::move(records), InputSource::kNone, [&](const NodeRecord& r) { return measured.at(&r); });
}

GraphProfile profile_records(const std::vector<std::shared_ptr<const NodeRecord>>& records, const Profiler& profiler,
                             uint64_t step_start) {
  std::vector<const NodeRecord*> raw;
  for (const auto& r : records) raw.push_back(r.get());
  return build(std::move(raw), step_start, [&](const NodeRecord& r) { return profiler.measured(r); });
}

}  // namespace remat::scheduler
