// What two parts of the Python module both turn into Python, or read from
// it: a device by name, a budget given as bytes, as text or as a share of
// keep-all's peak, a step's report as a dict, a profile as one dict per
// node, and a policy written in Python. Included by
// nn.cpp (checkpointing on modules), plans.cpp (profiles, plans and the
// Checkpointer on their own) and tensor.cpp (devices).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "python/bindings.h"
#include "scheduler/checkpointer.h"
#include "scheduler/plan.h"
#include "scheduler/simulate.h"
#include "train/limits.h"
#include "train/parse.h"

namespace remat::python {

using Budget = std::variant<int64_t, std::string>;

// "cpu", "cuda" or "cuda:N", checked as --device is (a GPU this process has).
inline Device device_named(const std::string& name) { return train::check_device(name, "device"); }

// A budget written as a share of keep-all's peak ("50%", as `remat bench
// --budget 50%`): the share in (0, 1], or nothing for bytes.
inline std::optional<double> budget_share(const std::optional<Budget>& budget) {
  const std::string* text = budget ? std::get_if<std::string>(&*budget) : nullptr;
  if (text == nullptr || !text->ends_with('%')) return std::nullopt;
  size_t used = 0;
  double percent = 0;
  try {
    percent = std::stod(text->substr(0, text->size() - 1), &used);
  } catch (const std::exception&) {
    used = 0;
  }
  REMAT_CHECK(used + 1 == text->size() && percent > 0 && percent <= 100, "budget '{}' is not a share of "
              "keep-all's peak in (0, 100]% (examples: 25%, 50%)", *text);
  return percent / 100;
}

// "64MiB", "1.5GB", a number of bytes, or "50%": that share of keep-all's
// simulated peak on `graph` (a budget as a share needs the step's graph: an
// error without one, naming `what`).
inline std::optional<int64_t> budget_bytes(const std::optional<Budget>& budget,
                                           const scheduler::GraphProfile* graph = nullptr,
                                           const std::string& what = "budget") {
  if (!budget) return std::nullopt;
  if (const int64_t* bytes = std::get_if<int64_t>(&*budget)) return *bytes;
  if (const std::optional<double> share = budget_share(budget)) {
    REMAT_CHECK(graph != nullptr, "{}: budget '{}' is a share of keep-all's peak, which needs the step's graph: "
                "give it in bytes ('64MiB') here, or use make_plan with a profile, or remat.nn.LlamaForCausalLM "
                "(it rehearses its first step)", what, std::get<std::string>(*budget));
    const int64_t keep_all = scheduler::simulate(*graph, std::vector<Tag>(graph->nodes.size(), Tag::Keep)).peak_bytes;
    return static_cast<int64_t>(*share * static_cast<double>(keep_all));
  }
  return train::parse_bytes(std::get<std::string>(*budget), "budget");
}

inline nb::dict report_dict(const scheduler::StepReport& r) {
  nb::dict d;
  d["step"] = r.step;
  d["profiling"] = r.profiling;
  d["policy"] = r.policy;
  d["budget_bytes"] = r.budget ? nb::cast(*r.budget) : nb::none();
  d["kept_bytes"] = r.kept_bytes;
  d["dropped_bytes"] = r.dropped_bytes;
  d["predicted_peak_bytes"] = r.predicted_peak_bytes ? nb::cast(*r.predicted_peak_bytes) : nb::none();
  d["minimum_budget_bytes"] = r.minimum_budget_bytes ? nb::cast(*r.minimum_budget_bytes) : nb::none();
  d["peak_activation_bytes"] = r.measured_peak_bytes;
  d["replayed_nodes"] = r.replayed_nodes;
  d["recompute_ms"] = r.recompute_ms;
  d["recompute_flops"] = r.recompute_flops;
  d["evictions"] = r.evictions;
  d["rebuilds"] = r.rebuilds;
  d["warnings"] = r.warnings;
  return d;
}

inline const char* tag_word(Tag tag) { return tag == Tag::Keep ? "keep" : "recompute"; }

inline std::vector<int64_t> dims(const Shape& shape) { return {shape.begin(), shape.end()}; }

// What a node's backward reads: "output", "side result", or an input's index.
inline nb::object saved_entry(int slot) {
  if (slot == kSavedOutput) return nb::str("output");
  if (slot == kSavedSideResult) return nb::str("side result");
  return nb::int_(slot);
}

inline nb::list saved_list(const std::vector<int>& saved) {
  nb::list out;
  for (int slot : saved) out.append(saved_entry(slot));
  return out;
}

// One dict per node of a profile (Profile.rows(), and what a policy written
// in Python reads); read_by_backward: some backward reads its value.
inline nb::list profile_rows(const scheduler::GraphProfile& graph) {
  const std::vector<bool> read = scheduler::read_by_backward(graph);
  nb::list rows;
  for (const scheduler::NodeProfile& node : graph.nodes) {
    nb::dict d;
    d["position"] = node.position;
    d["name"] = node.name;  // Note [Node names]: "transformer.h.3.attn/softmax"
    d["op"] = node.op;
    d["module"] = node.module;
    d["block"] = node.block;
    d["inputs"] = node.inputs;  // positions of the nodes that made its inputs (-1: a leaf or constant)
    d["output_shape"] = dims(node.output_shape);
    d["output_bytes"] = node.output_bytes;
    d["is_view"] = node.view_of >= 0;
    d["saved"] = saved_list(node.saved);
    d["read_by_backward"] = static_cast<bool>(read[static_cast<size_t>(node.position)]);
    d["tag"] = tag_word(node.tag);
    d["compute_bound"] = node.compute_bound;
    d["flops"] = node.flops;
    d["forward_ms"] = node.forward_ms;
    d["replay_ms"] = node.replay_ms;
    d["replay_in_place_ms"] = node.replay_in_place_ms;
    d["backward_ms"] = node.backward_ms;
    d["replay_cost_ms"] = node.priced_replay_ms();
    rows.append(d);
  }
  return rows;
}

// A policy written in Python: rule(nodes) -> one "keep" or "recompute" per
// node (nodes: profile_rows). Called with the GIL held: plans are made on
// the thread that runs the step, inside a call from Python.
//
// The rule often reaches what holds it (a lambda whose globals hold the
// model, a closure over it): a cycle through C++, which the collector sees
// only through the holders' types (rule_traverse and rule_clear, on Module
// and Checkpointer); unseen, the model and rule outlived the interpreter
// ("nanobind: leaked 4 instances").
struct PythonRule {
  nb::object rule;  // reset by rule_clear: the holder is being collected

  std::vector<Tag> operator()(const scheduler::GraphProfile& graph) const {
    nb::gil_scoped_acquire gil;
    REMAT_CHECK(rule.is_valid(), "policy: the Python rule was released (its module is being collected)");
    const nb::object answer = rule(profile_rows(graph));
    REMAT_CHECK(nb::isinstance<nb::list>(answer) || nb::isinstance<nb::tuple>(answer), "policy: the Python rule "
                "answered a {}: a list of 'keep' or 'recompute', one per node",
                nb::cast<std::string>(nb::str(answer.type().attr("__name__"))));
    std::vector<Tag> tags;
    for (nb::handle tag : answer) {
      const std::string word = nb::cast<std::string>(nb::str(tag));
      REMAT_CHECK(word == "keep" || word == "recompute", "policy: the Python rule answered '{}' for node {}: one of "
                  "'keep' and 'recompute' per node", word, tags.size());
      tags.push_back(word == "keep" ? Tag::Keep : Tag::Recompute);
    }
    return tags;
  }
};

// The Python rule `options` plan with, or null (a policy by name, or no
// options). Not const: rule_clear lets go of it.
inline PythonRule* python_rule(const scheduler::PlanOptions* options) {
  if (options == nullptr) return nullptr;
  // The function object itself is never const (a Checkpointer's member).
  return const_cast<PythonRule*>(options->custom.target<PythonRule>());
}

// tp_traverse and tp_clear of a type whose C++ object holds PlanOptions
// (`options_of` finds them): the collector visits the Python rule, and lets
// go of it to break a cycle. Only the object that owns its C++ object does
// (a second Python object over it, returned by reference, holds nothing).
template <class T, const scheduler::PlanOptions* (*options_of)(const T&)>
PythonRule* owned_rule(PyObject* self) {
  const auto [ready, owner] = nb::inst_state(self);
  return ready && owner ? python_rule(options_of(*nb::inst_ptr<T>(self))) : nullptr;
}

template <class T, const scheduler::PlanOptions* (*options_of)(const T&)>
int rule_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (const PythonRule* rule = owned_rule<T, options_of>(self)) Py_VISIT(rule->rule.ptr());
  return 0;
}

template <class T, const scheduler::PlanOptions* (*options_of)(const T&)>
int rule_clear(PyObject* self) {
  if (PythonRule* rule = owned_rule<T, options_of>(self)) rule->rule.reset();
  return 0;
}

// Each of the plan's warnings (Note [Nothing silent] in scheduler/plan.cpp)
// as a Python UserWarning; an error where warnings are errors.
inline void warn_about(const scheduler::Plan& plan) {
  if (plan.warnings.empty()) return;
  nb::gil_scoped_acquire gil;
  for (const std::string& warning : plan.warnings) {
    if (PyErr_WarnEx(PyExc_UserWarning, ("remat: " + warning).c_str(), 1) < 0) throw nb::python_error();
  }
}

// Rules as Python passes them: must_keep, must_recompute, prefer_keep,
// prefer_recompute (ops or node-name globs, scheduler/rules.h).
using Rules = std::vector<std::string>;

// The options a policy (a name, or a callable rule) and budget make, with
// the rules; every plan made with them warns from Python (warn_about).
// `graph`: the profile a share of keep-all's peak ("50%") is taken of, where
// there is one (make_plan).
inline scheduler::PlanOptions plan_options(const nb::object& policy, const std::optional<Budget>& budget,
                                           scheduler::Overrides overrides, const std::string& what,
                                           const scheduler::GraphProfile* graph = nullptr) {
  scheduler::PlanOptions options{.budget = budget_bytes(budget, graph, what), .overrides = std::move(overrides)};
  if (nb::isinstance<nb::str>(policy)) {
    options.policy = nb::cast<std::string>(policy);
    scheduler::check_policy(options.policy);
  } else {
    REMAT_CHECK(nb::isinstance<nb::callable>(policy), "{}: policy {} is neither a name "
                "(remat.scheduler.policy_names()) nor a callable rule(nodes) -> ['keep' | 'recompute', ...]", what,
                nb::cast<std::string>(nb::repr(policy)));
    options.policy = "custom";
    options.custom = PythonRule{nb::borrow<nb::object>(policy)};
  }
  options.on_plan = &warn_about;
  return options;
}

}  // namespace remat::python
