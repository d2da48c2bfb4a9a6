// What two parts of the Python module both turn into Python, or read from
// it: a device by name, a budget given as bytes or as text, a step's report as a dict, a
// profile as one dict per node, and a policy written in Python. Included by
// nn.cpp (checkpointing on modules) and scheduler.cpp (profiles, plans and
// the Checkpointer on their own); header-only, since cmake/python.cmake
// lists the module's sources.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "python/bindings.h"
#include "scheduler/checkpointer.h"
#include "scheduler/plan.h"
#include "train/limits.h"
#include "train/parse.h"

namespace remat::python {

using Budget = std::variant<int64_t, std::string>;

// "cpu", "cuda" or "cuda:N", checked as --device is (a GPU this process has).
inline Device device_named(const std::string& name) { return train::check_device(name, "device"); }

// "64MiB", "1.5GB" or a number of bytes.
inline std::optional<int64_t> budget_bytes(const std::optional<Budget>& budget) {
  if (!budget) return std::nullopt;
  if (const int64_t* bytes = std::get_if<int64_t>(&*budget)) return *bytes;
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
  return d;
}

// One dict per node of a profile: what a policy written in Python reads.
inline nb::list profile_rows(const scheduler::GraphProfile& graph) {
  const std::vector<bool> read = scheduler::read_by_backward(graph);
  nb::list rows;
  for (const scheduler::NodeProfile& node : graph.nodes) {
    nb::dict row;
    row["position"] = node.position;
    row["op"] = node.op;
    row["block"] = node.block;
    row["inputs"] = node.inputs;  // positions of the nodes that made its inputs (-1: a leaf or constant)
    row["output_shape"] = std::vector<int64_t>(node.output_shape.begin(), node.output_shape.end());
    row["output_bytes"] = node.output_bytes;
    row["is_view"] = node.view_of >= 0;
    row["read_by_backward"] = static_cast<bool>(read[static_cast<size_t>(node.position)]);
    row["compute_bound"] = node.compute_bound;
    row["flops"] = node.flops;
    row["forward_ms"] = node.forward_ms;
    row["replay_ms"] = node.priced_replay_ms();
    rows.append(row);
  }
  return rows;
}

// A policy written in Python: rule(nodes) -> one "keep" or "recompute" per
// node (nodes: profile_rows). Called with the GIL held: plans are made on
// the thread that runs the step, inside a call from Python.
inline scheduler::CustomPolicy python_policy(nb::callable rule) {
  return [rule = nb::object(rule)](const scheduler::GraphProfile& graph) {
    nb::gil_scoped_acquire gil;
    const nb::object answer = rule(profile_rows(graph));
    std::vector<Tag> tags;
    for (nb::handle tag : answer) {
      const std::string word = nb::cast<std::string>(nb::str(tag));
      REMAT_CHECK(word == "keep" || word == "recompute", "policy: the Python rule answered '{}' for node {}: one of "
                  "'keep' and 'recompute' per node", word, tags.size());
      tags.push_back(word == "keep" ? Tag::Keep : Tag::Recompute);
    }
    return tags;
  };
}

}  // namespace remat::python
