// remat.scheduler's profiles, plans and Checkpointer (bindings.h): a
// recorded step as a Profile whose prices may be set by hand, simulated
// (scheduler/simulate.h), planned under any policy or a rule written in
// Python (scheduler/plan.h), drawn (scheduler/dot.h), and the Checkpointer
// that plans a step before it runs. scheduler.cpp binds the rest of
// remat.scheduler: memory counts, observers and tag rules, Profiling.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "python/bindings.h"
#include "python/convert.h"
#include "python/tags.h"
#include "scheduler/checkpointer.h"
#include "scheduler/dot.h"
#include "scheduler/plan.h"
#include "scheduler/profile.h"
#include "scheduler/profile_json.h"
#include "scheduler/profiler.h"
#include "scheduler/simulate.h"

namespace remat::python {
namespace {

using scheduler::GraphProfile;
using scheduler::NodeProfile;
using scheduler::Plan;

nb::dict simulation_dict(const scheduler::Simulation& s) {
  nb::dict d;
  d["peak_bytes"] = s.peak_bytes;
  d["saved_bytes_after_forward"] = s.saved_bytes_after_forward;
  d["replayed_nodes"] = s.replayed_nodes;
  d["recompute_ms"] = s.recompute_ms;
  d["recompute_flops"] = s.recompute_flops;
  std::vector<int64_t> replayed;  // positions, in order
  for (size_t v = 0; v < s.replayed.size(); ++v) {
    if (s.replayed[v]) replayed.push_back(static_cast<int64_t>(v));
  }
  d["replayed"] = replayed;
  d["level_before_forward"] = s.level_before_forward;
  d["forward_peak_at"] = s.forward_peak_at;
  d["backward_peak_at"] = s.backward_peak_at;
  return d;
}

// The options of a plan, as the Python arguments give them: a policy's
// name, or a callable rule(nodes) -> one tag per node (profile_rows).
// A Checkpointer's record(), as a `with`.
class Recording {
 public:
  explicit Recording(scheduler::Checkpointer& owner) : owner_(owner) {}
  void enter() {
    REMAT_CHECK(!recording_, "Checkpointer.record(): this recording is open already (one `with` per record())");
    recording_ = owner_.record();
    open_at_entry_ = RecordingScope::open_on_this_thread();
  }
  void exit() {
    if (recording_) check_innermost(open_at_entry_, "Checkpointer.record()");
    recording_.reset();
  }

 private:
  scheduler::Checkpointer& owner_;
  std::unique_ptr<scheduler::Checkpointer::Recording> recording_;
  int open_at_entry_ = 0;
};

template <typename T>
std::optional<T> copy_of(const T* p) {
  if (!p) return std::nullopt;
  return *p;
}

const char* kCheckpointerDoc = "policy: a name (remat.scheduler.policy_names(): none, blocks, cost, ..., "
                               "every-n-blocks:2, ...) or a callable rule(nodes) -> one tag per node; budget: bytes, "
                               "or text such as '64MiB'; must_keep, must_recompute, prefer_keep, prefer_recompute: "
                               "ops (gelu) or globs over node names (h.*.attn/*); each plan's warnings are Python "
                               "warnings";

// Profiles: their nodes, simulation, the tags the engine applies.
void bind_profiles(nb::module_& m) {
  nb::class_<NodeProfile>(m, "ProfileNode", "One node of a Profile: what it is, and its prices (settable)")
      .def_ro("position", &NodeProfile::position)
      .def_prop_ro("op", [](const NodeProfile& n) { return n.op; })
      .def_ro("name", &NodeProfile::name, "module path and op: 'transformer.h.3.attn/softmax' (stable, the same as "
              "in C++ and `remat explain`)")
      .def_ro("module", &NodeProfile::module)
      .def_ro("block", &NodeProfile::block)
      .def_ro("inputs", &NodeProfile::inputs, "positions of the nodes that made its inputs (-1: a leaf or constant)")
      .def_prop_ro("output_shape", [](const NodeProfile& n) { return dims(n.output_shape); })
      .def_prop_ro("output_bytes", [](const NodeProfile& n) { return n.output_bytes; })
      .def_prop_ro("is_view", [](const NodeProfile& n) { return n.view_of >= 0; })
      .def_prop_ro("saved", [](const NodeProfile& n) { return saved_list(n.saved); },
                   "what its backward reads: 'output', 'side result' or an input's index")
      .def_prop_ro("compute_bound", [](const NodeProfile& n) { return n.compute_bound; })
      .def_prop_ro("flops", [](const NodeProfile& n) { return n.flops; })
      .def_prop_rw("forward_ms", [](const NodeProfile& n) { return n.forward_ms; },
                   [](NodeProfile& n, double ms) { n.forward_ms = ms; })
      .def_prop_rw("replay_ms", [](const NodeProfile& n) { return n.replay_ms; },
                   [](NodeProfile& n, double ms) { n.replay_ms = ms; }, "a replay into a new output (0: as forward)")
      .def_prop_rw("replay_in_place_ms", [](const NodeProfile& n) { return n.replay_in_place_ms; },
                   [](NodeProfile& n, double ms) { n.replay_in_place_ms = ms; },
                   "a replay over its input (0: as replay_ms)")
      .def_prop_rw("backward_ms", [](const NodeProfile& n) { return n.backward_ms; },
                   [](NodeProfile& n, double ms) { n.backward_ms = ms; })
      .def("__repr__", [](const NodeProfile& n) {
        return "<ProfileNode #" + std::to_string(n.position) + " " + n.op + ", " + std::to_string(n.output_bytes) +
               " bytes>";
      });

  nb::class_<GraphProfile>(m, "Profile", "A recorded graph, one node per op in recording order (the last is the "
                           "root): what the simulator and the planners read")
      .def("__len__", [](const GraphProfile& g) { return g.nodes.size(); })
      .def("__getitem__", [](GraphProfile& g, int64_t i) -> NodeProfile& {
        const int64_t n = g.size();
        REMAT_CHECK(i >= -n && i < n, "Profile: node {} of a graph of {} nodes", i, n);
        return g.nodes[static_cast<size_t>(i < 0 ? i + n : i)];
      }, nb::rv_policy::reference_internal)
      .def_prop_ro("nodes", [](nb::handle self) {
        nb::list nodes;
        for (NodeProfile& node : nb::cast<GraphProfile&>(self).nodes) {
          nodes.append(nb::cast(&node, nb::rv_policy::reference_internal, self));
        }
        return nodes;
      }, "the nodes (ProfileNode, their prices settable), in recording order")
      .def("rows", &profile_rows, "one dict per node: position, op, block, inputs, output_shape, output_bytes, "
           "is_view, saved, read_by_backward, tag, compute_bound, flops, forward_ms, replay_ms, replay_in_place_ms, "
           "backward_ms, replay_cost_ms (what the cost model charges for a replay)")
      .def_ro("signature", &GraphProfile::signature)
      .def_prop_ro("total_output_bytes", &GraphProfile::total_output_bytes)
      .def("to_json", [](const GraphProfile& g) { return scheduler::profile_to_json(g); })
      .def_static("from_json", [](const std::string& text) { return scheduler::profile_from_json(text); })
      .def("__repr__", [](const GraphProfile& g) { return "<Profile of " + std::to_string(g.size()) + " nodes>"; });
  m.def("profile_graph", &scheduler::profile_graph, nb::arg("root"),
        "the Profile of the graph that made `root` (after its backward, under Profiling, for measured times)");

  m.def("simulate", [](const GraphProfile& g, nb::handle tags) {
    return simulation_dict(scheduler::simulate(g, tags_for(g, tags, "simulate")));
  }, nb::arg("profile"), nb::arg("tags"),
        "what one step under `tags` (one 'keep' or 'recompute' per node) holds, predicted: peak_bytes, "
        "saved_bytes_after_forward, replayed_nodes, recompute_ms, recompute_flops, replayed (positions), and per "
        "node level_before_forward, forward_peak_at, backward_peak_at");
  m.def("effective_tags", [](const GraphProfile& g, nb::handle tags) {
    return tag_words(scheduler::effective_tags(g, tags_for(g, tags, "effective_tags")));
  }, nb::arg("profile"), nb::arg("tags"), "the tags the engine really applies (a view of a dropped value is dropped)");
  m.def("policy_names", &scheduler::policy_names);
}

// Plans of any policy, and their drawing.
void bind_plan(nb::module_& m) {
  nb::class_<Plan>(m, "Plan", "Which node keeps its output and which is replayed, and why")
      .def_ro("policy", &Plan::policy)
      .def_ro("budget", &Plan::budget)
      .def_prop_ro("tags", [](const Plan& p) { return tag_words(p.tags); }, "one 'keep' or 'recompute' per node")
      .def_ro("reasons", &Plan::reasons, "why each node has its tag")
      .def_ro("chosen_by", &Plan::chosen_by)
      .def_ro("detail", &Plan::detail)
      .def_ro("warnings", &Plan::warnings, "why the plan may not do what was asked: it drops nothing, or its budget "
              "binds nothing (each also a Python warning when the plan is made)")
      .def_ro("kept_bytes", &Plan::kept_bytes)
      .def_ro("dropped_bytes", &Plan::dropped_bytes)
      .def_ro("minimum_peak_bytes", &Plan::minimum_peak_bytes)
      .def_ro("minimum_budget_bytes", &Plan::minimum_budget_bytes)
      .def_ro("planning_ms", &Plan::planning_ms)
      .def_prop_ro("predicted", [](const Plan& p) { return simulation_dict(p.predicted); },
                   "simulate(profile, plan.tags)")
      .def("__repr__", [](const Plan& p) {
        int64_t dropped = 0;
        for (Tag tag : p.tags) dropped += tag == Tag::Recompute ? 1 : 0;
        return "<Plan " + p.policy + ": " + std::to_string(dropped) + " of " + std::to_string(p.tags.size()) +
               " nodes replayed, predicted peak " + std::to_string(p.predicted.peak_bytes) + " bytes>";
      });
  m.def("make_plan",
        [](const GraphProfile& g, nb::object policy, std::optional<Budget> budget, Rules must_keep,
           Rules must_recompute, Rules prefer_keep, Rules prefer_recompute) {
          const scheduler::PlanOptions options = plan_options(
              policy, budget, {std::move(must_keep), std::move(must_recompute), std::move(prefer_keep),
                               std::move(prefer_recompute)}, "make_plan", &g);
          scheduler::Plan plan = scheduler::make_plan(g, options);
          warn_about(plan);
          return plan;
        },
        nb::arg("profile"), nb::arg("policy") = "none", nb::arg("budget") = nb::none(), nb::arg("must_keep") = Rules{},
        nb::arg("must_recompute") = Rules{}, nb::arg("prefer_keep") = Rules{}, nb::arg("prefer_recompute") = Rules{},
        "the plan of `policy` (a name from policy_names(), or a callable rule(nodes) -> one tag per node) for the "
        "profile, within `budget` (bytes, text such as '64MiB', or a share of keep-all's peak on the profile such "
        "as '50%'); the rules name ops (gelu) or node-name globs "
        "(h.*.attn/*); its warnings (a plan that drops nothing, a budget above keep-all's peak) are Python "
        "warnings");
  m.def("to_dot", &scheduler::to_dot, nb::arg("profile"), nb::arg("plan"), "the plan as Graphviz DOT text");
}

// A Python policy held by a Checkpointer, seen by the collector (PythonRule
// in convert.h).
const scheduler::PlanOptions* checkpointer_options(const scheduler::Checkpointer& checkpointer) {
  return &checkpointer.options();
}
PyType_Slot checkpointer_slots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(&rule_traverse<scheduler::Checkpointer, &checkpointer_options>)},
    {Py_tp_clear, reinterpret_cast<void*>(&rule_clear<scheduler::Checkpointer, &checkpointer_options>)},
    {0, nullptr}};

// The Checkpointer, and a module's checkpointing seen as profiles and plans.
void bind_checkpointer(nb::module_& m) {
  nb::class_<Recording>(m, "_Recording")
      .def("__enter__", [](Recording& r) { r.enter(); })
      .def("__exit__", [](Recording& r, nb::handle, nb::handle, nb::handle) { r.exit(); }, nb::arg().none(),
           nb::arg().none(), nb::arg().none());
  nb::class_<scheduler::Checkpointer>(m, "Checkpointer",
                                      "Plans a step's graph and applies the plan to the steps recorded under "
                                      "record(): the first step of a graph profiles it, unless rehearse() planned "
                                      "it from shapes and bytes first",
                                      nb::type_slots(checkpointer_slots))
      .def("__init__",
           [](scheduler::Checkpointer* self, nb::object policy, std::optional<Budget> budget, Rules must_keep,
              Rules must_recompute, Rules prefer_keep, Rules prefer_recompute) {
             new (self) scheduler::Checkpointer(plan_options(
                 policy, budget, {std::move(must_keep), std::move(must_recompute), std::move(prefer_keep),
                                  std::move(prefer_recompute)}, "Checkpointer"));
           },
           nb::arg("policy") = "none", nb::arg("budget") = nb::none(), nb::arg("must_keep") = Rules{},
           nb::arg("must_recompute") = Rules{}, nb::arg("prefer_keep") = Rules{}, nb::arg("prefer_recompute") = Rules{},
           kCheckpointerDoc)
      .def("record", [](scheduler::Checkpointer& c) { return new Recording(c); }, nb::keep_alive<0, 1>(),
           nb::rv_policy::take_ownership, "with checkpointer.record(): the forward of one step, tagged by the plan")
      .def("rehearse", [](scheduler::Checkpointer& c, nb::callable step) { c.rehearse([&] { step(); }); },
           nb::arg("step"),
           "runs step() (a forward under record() and its backward) once on the meta device and plans its graph: "
           "the next step runs under the plan")
      .def("plan_from", &scheduler::Checkpointer::plan_from, nb::arg("profile"),
           "plans the graph of a saved profile now, so that its first step runs under the plan")
      .def("report", [](const scheduler::Checkpointer& c) { return report_dict(c.report()); },
           "the latest step's figures: kept and dropped bytes, predicted peak, measured peak "
           "(peak_activation_bytes), minimum budget, replays")
      .def_prop_ro("plan", [](const scheduler::Checkpointer& c) { return copy_of(c.plan()); },
                   "the plan applied to the latest step (a copy), or None for a profiling step")
      .def_prop_ro("profile", [](const scheduler::Checkpointer& c) { return copy_of(c.profile()); },
                   "the profile of the latest planned graph (a copy), or None");

  // A module's checkpointing, seen as profiles and plans.
  m.def("checkpointing_profile", [](const nn::Module& model) { return copy_of(model.checkpointing_profile()); },
        nb::arg("model"), "the profile the model's latest plan was made from (a copy), or None");
  m.def("checkpointing_plan", [](const nn::Module& model) { return copy_of(model.checkpointing_plan()); },
        nb::arg("model"), "the plan applied to the model's latest step (a copy), or None");
}

}  // namespace

void bind_plans(nb::module_& m) {
  bind_profiles(m);
  bind_plan(m);
  bind_checkpointer(m);
}

}  // namespace remat::python
