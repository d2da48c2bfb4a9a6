// remat.scheduler (bindings.h): the engine seen from inside, for whoever
// studies or teaches it. Observers hear the engine's graph events
// (engine/observer.h); a Python rule tags nodes as they are recorded
// (RecomputeScope); the allocator's counts come as a dict; a step is
// profiled (scheduler/profiler.h), its prices may be set by hand, and it is
// simulated, planned and drawn (scheduler/simulate.h, plan.h, dot.h); the
// Checkpointer plans a step before it runs. Tags are the words "keep" and
// "recompute". python/remat/scheduler.py is its face; examples/tour.py its
// tour. Module checkpointing (model.gradient_checkpointing_enable) is nn.cpp's.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/observer.h"
#include "nn/module.h"
#include "python/bindings.h"
#include "python/convert.h"
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

// Tags ----------------------------------------------------------------------

Tag tag_named(const nb::handle& word, const std::string& what) {
  const std::string text = nb::cast<std::string>(nb::str(word));
  REMAT_CHECK(text == "keep" || text == "recompute", "{}: tag '{}': one of 'keep' and 'recompute'", what, text);
  return text == "keep" ? Tag::Keep : Tag::Recompute;
}

// One tag per node of `graph`, from a list of words.
std::vector<Tag> tags_for(const GraphProfile& graph, const nb::handle& words, const std::string& what) {
  std::vector<Tag> tags;
  for (nb::handle word : words) tags.push_back(tag_named(word, what + " (node " + std::to_string(tags.size()) + ")"));
  REMAT_CHECK(static_cast<int64_t>(tags.size()) == graph.size(), "{}: {} tags for a graph of {} nodes: one per node",
              what, tags.size(), graph.size());
  return tags;
}

std::vector<std::string> tag_words(const std::vector<Tag>& tags) {
  std::vector<std::string> words;
  for (Tag tag : tags) words.emplace_back(tag_word(tag));
  return words;
}

// Memory ----------------------------------------------------------------------

MemoryCategory category_named(const std::string& name) {
  for (size_t c = 0; c < kMemoryCategories; ++c) {
    if (category_name(static_cast<MemoryCategory>(c)) == name) return static_cast<MemoryCategory>(c);
  }
  REMAT_FAIL("category '{}': one of parameter, gradient, optimizer_state, activation, temporary, data", name);
}

// The allocator's counts: totals, transient (activation + temporary: what
// checkpointing saves), and per category.
nb::dict stats_dict(const MemoryStats& s) {
  nb::dict d, live, peak;
  for (size_t c = 0; c < kMemoryCategories; ++c) {
    const std::string name(category_name(static_cast<MemoryCategory>(c)));
    live[name.c_str()] = s.live[c];
    peak[name.c_str()] = s.peak[c];
  }
  d["live_total"] = s.live_total;
  d["peak_total"] = s.peak_total;
  d["live_transient"] = s.live_transient;
  d["peak_transient"] = s.peak_transient;
  d["allocations"] = s.allocations;
  d["cached"] = s.cached;
  d["live"] = live;
  d["peak"] = peak;
  return d;
}

// `with category("parameter"):` counts what is allocated inside as that.
class Category {
 public:
  explicit Category(const std::string& name) : category_(category_named(name)) {}
  void enter() {
    REMAT_CHECK(!guard_, "category(): this block is open already (one `with` at a time)");
    guard_ = std::make_unique<CategoryGuard>(category_);
  }
  void exit() { guard_.reset(); }

 private:
  MemoryCategory category_;
  std::unique_ptr<CategoryGuard> guard_;
};

// `with peak_watch() as w:`: w.rise is how far live transient bytes rose
// above their level at entry, at the highest (until now, or until exit).
class PeakWatch {
 public:
  explicit PeakWatch(Device device) : device_(device) {}
  void enter() {
    REMAT_CHECK(!watch_, "peak_watch(): this block is open already (one `with` at a time)");
    watch_ = std::make_unique<TransientPeakWatch>(device_);
  }
  void exit() {
    rise_ = rise();
    watch_.reset();
  }
  int64_t rise() const { return watch_ ? watch_->rise() : rise_; }

 private:
  Device device_;
  std::unique_ptr<TransientPeakWatch> watch_;
  int64_t rise_ = 0;
};

// Observing ---------------------------------------------------------------

// A node as Python sees it in an event: what the engine recorded of it.
// `complete` false: asked by a tag rule, before its tag and saved values
// are known.
nb::dict node_dict(const Node& node, bool complete) {
  const NodeRecord& r = node.record();
  nb::dict d;
  d["id"] = r.sequence_nr;  // recording order, unique in the process
  d["op"] = std::string(node.name());
  d["output_shape"] = dims(r.output_shape);
  d["output_dtype"] = std::string(dtype_name(r.output_dtype));
  d["output_bytes"] = r.output_bytes;  // 0 for a view: no storage of its own
  d["is_view"] = r.view_of >= 0;
  std::vector<int64_t> inputs;  // the ids of the nodes that made its inputs (-1: a leaf or constant)
  for (const InputSource& source : r.inputs) {
    inputs.push_back(source.producer == InputSource::kNone ? -1 : static_cast<int64_t>(source.producer));
  }
  d["inputs"] = inputs;
  d["block"] = r.block ? nb::cast(*r.block) : nb::none();
  d["compute_bound"] = r.compute_bound;
  d["flops"] = r.flops;
  if (complete) {
    d["tag"] = tag_word(r.tag);
    d["saved"] = saved_list(r.saved);  // what its backward reads
  }
  return d;
}

// Passes the engine's events to a Python object's methods of the same names
// (those it has): recorded(node), replay_started(node), replayed(node,
// in_place), backward_started(node), backward_finished(node),
// saved_value_released(node, saved), pass_started(root), pass_finished(root),
// failed(node). Nodes keep it (Note [Graph events]), so it keeps the object.
// An exception a method raises propagates through the engine to the caller.
//
// A graph kept in a global of the module that defines the observer's class
// makes a cycle through C++ that Python's collector cannot see (tensor ->
// node -> observer -> its class's globals -> tensor): at exit, forget_all()
// lets go of every observer's object first, so that the interpreter can
// free them all as it finishes.
class PythonObserver final : public GraphObserver {
 public:
  explicit PythonObserver(nb::object handler) : handler_(std::move(handler)) { live().insert(this); }
  ~PythonObserver() override {
    if (!Py_IsInitialized()) {
      live().erase(this);
      (void)handler_.release();  // the interpreter is gone: nothing to release to
      return;
    }
    nb::gil_scoped_acquire gil;
    live().erase(this);
    handler_.reset();
  }

  // Called at exit (atexit, with the GIL): every observer stops calling Python.
  static void forget_all() {
    std::vector<nb::object> handlers;
    for (PythonObserver* observer : live()) handlers.push_back(std::move(observer->handler_));
    handlers.clear();  // may free nodes, and observers, which leave live() as they go
  }

  void recorded(Node& node) override { call("recorded", node); }
  void replay_started(Node& node, Device) override { call("replay_started", node); }
  void replayed(Node& node, bool in_place) override { call("replayed", node, nb::bool_(in_place)); }
  void backward_started(Node& node, const Tensor&) override { call("backward_started", node); }
  void backward_finished(Node& node, const Tensor&, const Tensors&) override { call("backward_finished", node); }
  void saved_value_released(Node& node, int record_index) override {
    call("saved_value_released", node, saved_entry(node.record().saved.at(static_cast<size_t>(record_index))));
  }
  void pass_started(Node& root, Device) override { call("pass_started", root); }
  void pass_finished(Node& root) override { call("pass_finished", root); }
  void failed(Node& node) override { call("failed", node); }

 private:
  // Every PythonObserver alive (touched with the GIL held).
  static std::set<PythonObserver*>& live() {
    static std::set<PythonObserver*> observers;
    return observers;
  }
  template <typename... Extra>
  void call(const char* event, const Node& node, Extra... extra) {
    nb::gil_scoped_acquire gil;
    if (!handler_ || !nb::hasattr(handler_, event)) return;
    handler_.attr(event)(node_dict(node, true), extra...);
  }
  nb::object handler_;
};

// Makes a PythonObserver of `handler` current on this thread from open()
// to close(): remat.scheduler.Observer's `with`.
class ObserverScope {
 public:
  explicit ObserverScope(nb::object handler)
      : scope_(std::make_unique<GraphObserverScope>(std::make_shared<PythonObserver>(std::move(handler)))) {}
  void close() { scope_.reset(); }

 private:
  std::unique_ptr<GraphObserverScope> scope_;
};

// `with RecomputeScope(rule):` tags each node recorded inside by
// rule(node) -> "keep" or "recompute" (node: node_dict, before its tag).
class PythonRecomputeScope {
 public:
  explicit PythonRecomputeScope(nb::callable rule) : rule_(std::move(rule)) {}
  void enter() {
    REMAT_CHECK(!scope_, "RecomputeScope: this block is open already (one `with` at a time)");
    scope_ = std::make_unique<RecomputeScope>([this](const Node& node) {
      nb::gil_scoped_acquire gil;
      const nb::object answer = rule_(node_dict(node, false));
      return tag_named(answer, "RecomputeScope: the rule's answer for node " + std::string(node.name()) + " (id " +
                                   std::to_string(node.record().sequence_nr) + ")");
    });
  }
  void exit() { scope_.reset(); }

 private:
  nb::callable rule_;
  std::unique_ptr<RecomputeScope> scope_;  // after rule_: closed before the rule goes
};

// Profiles, simulations, plans ------------------------------------------------

// `with Profiling() as p:` measures the nodes recorded inside.
class PythonProfiling {
 public:
  void enter() {
    REMAT_CHECK(!profiling_, "Profiling: this block is open already (one `with` at a time)");
    profiling_ = std::make_unique<scheduler::Profiling>();
    profiler_ = profiling_->profiler();
  }
  void exit() { profiling_.reset(); }
  nb::dict replays() {
    REMAT_CHECK(profiler_ != nullptr, "Profiling: replays() before the profiling began (use it in a with)");
    const scheduler::ReplayStats r = profiler_->replays();
    nb::dict d;
    d["nodes"] = r.nodes;
    d["ms"] = r.ms;
    d["flops"] = r.flops;
    return d;
  }

 private:
  std::unique_ptr<scheduler::Profiling> profiling_;
  std::shared_ptr<scheduler::Profiler> profiler_;
};

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
scheduler::PlanOptions plan_options(const nb::object& policy, const std::optional<Budget>& budget,
                                    std::vector<std::string> must_keep, std::vector<std::string> must_recompute) {
  scheduler::PlanOptions options{.budget = budget_bytes(budget),
                                 .overrides = {.must_keep = std::move(must_keep),
                                               .must_recompute = std::move(must_recompute)}};
  if (nb::isinstance<nb::str>(policy)) {
    options.policy = nb::cast<std::string>(policy);
    scheduler::check_policy(options.policy);
  } else {
    REMAT_CHECK(nb::isinstance<nb::callable>(policy), "policy {}: a name (remat.scheduler.policy_names()) or a "
                "callable rule(nodes) -> ['keep' | 'recompute', ...]", nb::cast<std::string>(nb::repr(policy)));
    options.policy = "custom";
    options.custom = python_policy(nb::borrow<nb::callable>(policy));
  }
  return options;
}

// A Checkpointer's record(), as a `with`.
class Recording {
 public:
  explicit Recording(scheduler::Checkpointer& owner) : owner_(owner) {}
  void enter() {
    REMAT_CHECK(!recording_, "Checkpointer.record(): this recording is open already (one `with` per record())");
    recording_ = owner_.record();
  }
  void exit() { recording_.reset(); }

 private:
  scheduler::Checkpointer& owner_;
  std::unique_ptr<scheduler::Checkpointer::Recording> recording_;
};

template <typename T>
std::optional<T> copy_of(const T* p) {
  if (!p) return std::nullopt;
  return *p;
}

const char* kCheckpointerDoc = "policy: a name (none, blocks, sqrt, cost, chain, milp, auto, dtr) or a callable "
                               "rule(nodes) -> one tag per node; budget: bytes, or text such as '64MiB'; "
                               "must_keep, must_recompute: ops";

}  // namespace

void bind_scheduler(nb::module_& m) {
  // Memory.
  m.def("memory_stats",
        [](const std::string& device) { return stats_dict(allocator_for(device_named(device)).stats()); },
        nb::arg("device") = "cpu",
        "the allocator's counts as a dict: live_total, peak_total, live_transient and peak_transient (activation + "
        "temporary: what checkpointing saves), allocations, cached, and live and peak per category");
  nb::class_<Category>(m, "category", "with category('parameter'): what is allocated inside counts as that "
                       "(parameter, gradient, optimizer_state, activation, temporary, data)")
      .def(nb::init<const std::string&>(), nb::arg("name"))
      .def("__enter__", [](Category& c) { c.enter(); })
      .def("__exit__", [](Category& c, nb::handle, nb::handle, nb::handle) { c.exit(); }, nb::arg().none(),
           nb::arg().none(), nb::arg().none());
  nb::class_<PeakWatch>(m, "peak_watch", "with peak_watch() as w: w.rise is the highest rise of live transient "
                        "bytes over their level at entry (until now, or until the with ended)")
      .def("__init__", [](PeakWatch* self, const std::string& device) { new (self) PeakWatch(device_named(device)); },
           nb::arg("device") = "cpu")
      .def("__enter__", [](PeakWatch& w) -> PeakWatch& { w.enter(); return w; }, nb::rv_policy::reference)
      .def("__exit__", [](PeakWatch& w, nb::handle, nb::handle, nb::handle) { w.exit(); }, nb::arg().none(),
           nb::arg().none(), nb::arg().none())
      .def_prop_ro("rise", &PeakWatch::rise);

  // Observing and tagging.
  nb::module_::import_("atexit").attr("register")(nb::cpp_function(&PythonObserver::forget_all));
  nb::class_<ObserverScope>(m, "_ObserverScope")
      .def(nb::init<nb::object>(), nb::arg("handler"))
      .def("close", &ObserverScope::close);
  nb::class_<PythonRecomputeScope>(m, "RecomputeScope", "with RecomputeScope(rule): each node recorded inside is "
                                   "tagged rule(node) -> 'keep' or 'recompute' (node: a dict of id, op, "
                                   "output_shape, output_bytes, inputs, block, flops, ...)")
      .def(nb::init<nb::callable>(), nb::arg("rule"))
      .def("__enter__", [](PythonRecomputeScope& s) { s.enter(); })
      .def("__exit__", [](PythonRecomputeScope& s, nb::handle, nb::handle, nb::handle) { s.exit(); },
           nb::arg().none(), nb::arg().none(), nb::arg().none());

  // Profiles.
  nb::class_<PythonProfiling>(m, "Profiling", "with Profiling(): the nodes recorded inside are measured (their "
                              "forward, replays and backward, whenever they run); then profile_graph(loss)")
      .def(nb::init<>())
      .def("__enter__", [](PythonProfiling& p) -> PythonProfiling& { p.enter(); return p; }, nb::rv_policy::reference)
      .def("__exit__", [](PythonProfiling& p, nb::handle, nb::handle, nb::handle) { p.exit(); }, nb::arg().none(),
           nb::arg().none(), nb::arg().none())
      .def("replays", &PythonProfiling::replays, "the replays it saw: nodes, ms, flops");

  nb::class_<NodeProfile>(m, "ProfileNode", "One node of a Profile: what it is, and its prices (settable)")
      .def_ro("position", &NodeProfile::position)
      .def_prop_ro("op", [](const NodeProfile& n) { return n.op; })
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

  nb::class_<Plan>(m, "Plan", "Which node keeps its output and which is replayed, and why")
      .def_ro("policy", &Plan::policy)
      .def_ro("budget", &Plan::budget)
      .def_prop_ro("tags", [](const Plan& p) { return tag_words(p.tags); }, "one 'keep' or 'recompute' per node")
      .def_ro("reasons", &Plan::reasons, "why each node has its tag")
      .def_ro("chosen_by", &Plan::chosen_by)
      .def_ro("detail", &Plan::detail)
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
        [](const GraphProfile& g, nb::object policy, std::optional<Budget> budget, std::vector<std::string> must_keep,
           std::vector<std::string> must_recompute) {
          return scheduler::make_plan(g, plan_options(policy, budget, std::move(must_keep), std::move(must_recompute)));
        },
        nb::arg("profile"), nb::arg("policy") = "none", nb::arg("budget") = nb::none(),
        nb::arg("must_keep") = std::vector<std::string>{}, nb::arg("must_recompute") = std::vector<std::string>{},
        "the plan of `policy` (none, blocks, sqrt, cost, chain, milp, auto; or a callable rule(nodes) -> one tag "
        "per node) for the profile, within `budget` (bytes, or text such as '64MiB'); must_keep and "
        "must_recompute name ops");
  m.def("to_dot", &scheduler::to_dot, nb::arg("profile"), nb::arg("plan"), "the plan as Graphviz DOT text");

  // The Checkpointer.
  nb::class_<Recording>(m, "_Recording")
      .def("__enter__", [](Recording& r) { r.enter(); })
      .def("__exit__", [](Recording& r, nb::handle, nb::handle, nb::handle) { r.exit(); }, nb::arg().none(),
           nb::arg().none(), nb::arg().none());
  nb::class_<scheduler::Checkpointer>(m, "Checkpointer",
                                      "Plans a step's graph and applies the plan to the steps recorded under "
                                      "record(): the first step of a graph profiles it, unless rehearse() planned "
                                      "it from shapes and bytes first")
      .def("__init__",
           [](scheduler::Checkpointer* self, nb::object policy, std::optional<Budget> budget,
              std::vector<std::string> must_keep, std::vector<std::string> must_recompute) {
             new (self) scheduler::Checkpointer(
                 plan_options(policy, budget, std::move(must_keep), std::move(must_recompute)));
           },
           nb::arg("policy") = "none", nb::arg("budget") = nb::none(),
           nb::arg("must_keep") = std::vector<std::string>{}, nb::arg("must_recompute") = std::vector<std::string>{},
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

}  // namespace remat::python
