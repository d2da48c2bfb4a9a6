// remat.scheduler (bindings.h), first part: the engine seen from inside,
// for whoever studies or teaches it. The allocator's counts come as a dict;
// observers hear the engine's graph events (engine/recording.h); a Python
// rule tags nodes as they are recorded (RecomputeScope); Profiling measures
// a step (scheduler/profiler.h). Tags are the words "keep" and "recompute"
// (tags.h). Profiles, plans and the Checkpointer are plans.cpp's;
// python/remat/scheduler.py is the face of both, examples/tour.py their
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
#include "engine/recording.h"
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
    open_at_entry_ = RecordingScope::open_on_this_thread();
  }
  void exit() {
    if (scope_) check_innermost(open_at_entry_, "RecomputeScope");
    scope_.reset();
  }

 private:
  int open_at_entry_ = 0;
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
    open_at_entry_ = RecordingScope::open_on_this_thread();
  }
  void exit() {
    if (profiling_) check_innermost(open_at_entry_, "Profiling");
    profiling_.reset();
  }
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
  int open_at_entry_ = 0;
};

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

}

}  // namespace remat::python
