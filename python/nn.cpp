// remat.Module (Linear, MLP, GPT) with activation checkpointing, the
// optimizers and safetensors (bindings.h). Checkpointing reads as Hugging
// Face's: model.gradient_checkpointing_enable(policy="cost",
// budget="64MiB"); model.checkpointing_report() is the latest step's
// figures as a dict, model.explain() the applied plan as one dict per node.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "engine/rng.h"
#include "nn/gpt.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/module.h"
#include "nn/safetensors.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "python/bindings.h"
#include "scheduler/checkpointer.h"
#include "scheduler/plan.h"
#include "train/parse.h"

namespace remat::python {
namespace {

using Budget = std::variant<int64_t, std::string>;

// "64MiB", "1.5GB" or a number of bytes.
std::optional<int64_t> budget_bytes(const std::optional<Budget>& budget) {
  if (!budget) return std::nullopt;
  if (const int64_t* bytes = std::get_if<int64_t>(&*budget)) return *bytes;
  return train::parse_bytes(std::get<std::string>(*budget), "budget");
}

nb::dict report_dict(const scheduler::StepReport& r) {
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
nb::list profile_rows(const scheduler::GraphProfile& graph) {
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
scheduler::CustomPolicy python_policy(nb::callable rule) {
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

// One dict per node of the applied plan, as `remat explain` prints them.
nb::list explain(const nn::Module& model) {
  const scheduler::GraphProfile* graph = model.checkpointing_profile();
  const scheduler::Plan* plan = model.checkpointing_plan();
  REMAT_CHECK(graph && plan, "explain: no plan applied yet (checkpointing is off, or the latest step was the graph's "
              "profiling step: run one more step)");
  nb::list rows;
  for (const scheduler::NodeProfile& node : graph->nodes) {
    const auto v = static_cast<size_t>(node.position);
    nb::dict row;
    row["position"] = node.position;
    row["op"] = node.op;
    row["block"] = node.block;
    row["output_shape"] = std::vector<int64_t>(node.output_shape.begin(), node.output_shape.end());
    row["output_bytes"] = node.output_bytes;
    row["flops"] = node.flops;
    row["forward_ms"] = node.forward_ms;
    row["replay_ms"] = node.priced_replay_ms();
    row["decision"] = plan->tags[v] == Tag::Keep ? "keep" : "recompute";
    row["reason"] = plan->reasons[v];
    rows.append(row);
  }
  return rows;
}

std::vector<Tensor> parameter_list(const nb::handle& params) {
  std::vector<Tensor> out;
  for (nb::handle p : params) out.push_back(nb::cast<Tensor>(p));
  return out;
}

}  // namespace

void bind_nn(nb::module_& m) {
  nb::class_<nn::Module>(m, "Module", "A module tree with named parameters and activation checkpointing")
      .def("__call__", [](nn::Module& self, const Tensor& x) { return self.forward(x); })
      .def("forward", [](nn::Module& self, const Tensor& x) { return self.forward(x); })
      .def("parameters", &nn::Module::parameters)
      .def("named_parameters", &nn::Module::named_parameters)
      .def("train", [](nn::Module& self, bool on) -> nn::Module& { return self.train(on); }, nb::arg("mode") = true,
           nb::rv_policy::reference)
      .def("eval", [](nn::Module& self) -> nn::Module& { return self.eval(); }, nb::rv_policy::reference)
      .def("gradient_checkpointing_enable",
           [](nn::Module& self, nb::object policy, std::optional<Budget> budget, std::vector<std::string> must_keep,
              std::vector<std::string> must_recompute) {
             scheduler::PlanOptions options{.budget = budget_bytes(budget),
                                            .overrides = {.must_keep = std::move(must_keep),
                                                          .must_recompute = std::move(must_recompute)}};
             if (nb::isinstance<nb::str>(policy)) {
               options.policy = nb::cast<std::string>(policy);
             } else {
               REMAT_CHECK(nb::isinstance<nb::callable>(policy), "gradient_checkpointing_enable: policy must be a "
                           "name or a callable rule(nodes) -> ['keep' | 'recompute', ...]");
               options.policy = "custom";
               options.custom = python_policy(nb::borrow<nb::callable>(policy));
             }
             self.gradient_checkpointing_enable(std::move(options));
           },
           nb::arg("policy") = "blocks", nb::arg("budget") = nb::none(), nb::arg("must_keep") = std::vector<std::string>{},
           nb::arg("must_recompute") = std::vector<std::string>{},
           "checkpoint this module's forward: policy none, blocks, sqrt, cost, chain, milp, auto or dtr, or a callable "
           "rule(nodes) -> one 'keep' or 'recompute' per node (nodes: dicts of the profile: op, block, inputs, "
           "output_bytes, read_by_backward, compute_bound, flops, forward_ms, replay_ms, ...); budget in bytes or as "
           "'64MiB' (cost, chain, milp, auto, dtr, a callable)")
      .def("gradient_checkpointing_disable", &nn::Module::gradient_checkpointing_disable)
      .def_prop_ro("is_gradient_checkpointing", &nn::Module::is_gradient_checkpointing)
      .def("checkpointing_report", [](const nn::Module& self) -> std::optional<nb::dict> {
        const auto report = self.checkpointing_report();
        if (!report) return std::nullopt;
        return report_dict(*report);
      }, "the latest step's figures (kept and dropped bytes, predicted and measured peak, replays), or None")
      .def("explain", &explain, "the applied plan: one dict per node (op, bytes, decision, reason)");

  nb::class_<nn::Linear, nn::Module>(m, "Linear")
      .def("__init__", [](nn::Linear* self, int64_t in, int64_t out, bool bias, uint64_t seed) {
        Generator g(seed);
        new (self) nn::Linear(in, out, bias, g);
      }, nb::arg("in_features"), nb::arg("out_features"), nb::arg("bias") = true, nb::arg("seed") = 0)
      .def_prop_ro("weight", &nn::Linear::weight)
      .def_prop_ro("bias", &nn::Linear::bias);

  nb::class_<nn::MLP, nn::Module>(m, "MLP", "Linear layers with ReLU between: sizes from input to output")
      .def("__init__", [](nn::MLP* self, std::vector<int64_t> sizes, uint64_t seed) {
        Generator g(seed);
        new (self) nn::MLP(std::move(sizes), g);
      }, nb::arg("sizes"), nb::arg("seed") = 0);

  nb::class_<nn::GPT, nn::Module>(m, "GPT", "GPT-2's layout and parameter names")
      .def("__init__",
           [](nn::GPT* self, int64_t vocab_size, int64_t block_size, int64_t n_layer, int64_t n_head, int64_t n_embd,
              double dropout, bool tie_weights, uint64_t seed, const std::string& dtype) {
             REMAT_CHECK(dtype == "float32" || dtype == "float64", "GPT: dtype '{}': float32 or float64", dtype);
             new (self) nn::GPT({.vocab_size = vocab_size, .block_size = block_size, .n_layer = n_layer,
                                 .n_head = n_head, .n_embd = n_embd, .dropout = dropout, .tie_weights = tie_weights,
                                 .dtype = dtype == "float32" ? DType::Float32 : DType::Float64, .seed = seed});
           },
           nb::arg("vocab_size") = 256, nb::arg("block_size") = 128, nb::arg("n_layer") = 6, nb::arg("n_head") = 4,
           nb::arg("n_embd") = 256, nb::arg("dropout") = 0.0, nb::arg("tie_weights") = true, nb::arg("seed") = 0,
           nb::arg("dtype") = "float32")
      .def("__call__", [](nn::GPT& self, const Tensor& ids, std::optional<Tensor> targets) {
        const nn::GPTOutput out = self.forward(ids, targets.value_or(Tensor()));
        return std::make_tuple(out.logits, out.loss.defined() ? std::optional<Tensor>(out.loss) : std::nullopt);
      }, nb::arg("ids"), nb::arg("targets") = nb::none(),
           "(logits, loss): loss is None without targets. Under a checkpointing budget let the logits go before "
           "backward (loss = model(ids, targets)[1]): the plan counts on it, and logits held through backward add "
           "their bytes to the step's peak");

  m.def("save_safetensors", [](const nn::Module& module, const std::string& path) { nn::save_safetensors(module, path); },
        "the module's parameters to a .safetensors file (Hugging Face's GPT-2 names for GPT)");
  m.def("load_safetensors", [](nn::Module& module, const std::string& path) { nn::load_safetensors(module, path); },
        "the file's tensors into the module's parameters of the same names, all or nothing");
  m.def("read_safetensors", [](const std::string& path) {
    nb::dict out;
    for (const auto& [name, t] : nn::read_safetensors(path)) out[name.c_str()] = t;
    return out;
  }, "every tensor of a .safetensors file, by name");
  m.def("write_safetensors", &nn::write_safetensors, nb::arg("path"), nb::arg("tensors"),
        nb::arg("metadata") = nn::SafetensorsMetadata{});

  nb::class_<optim::Optimizer>(m, "Optimizer")
      .def("step", &optim::Optimizer::step)
      .def("zero_grad", &optim::Optimizer::zero_grad, "gradients set to None (their bytes freed)")
      .def_prop_rw("lr", &optim::Optimizer::lr, &optim::Optimizer::set_lr);
  nb::class_<optim::SGD, optim::Optimizer>(m, "SGD")
      .def("__init__", [](optim::SGD* self, nb::handle params, double lr, double momentum, double weight_decay,
                          bool nesterov) {
        new (self) optim::SGD(parameter_list(params),
                              {.lr = lr, .momentum = momentum, .weight_decay = weight_decay, .nesterov = nesterov});
      }, nb::arg("params"), nb::arg("lr") = 1e-3, nb::arg("momentum") = 0.0, nb::arg("weight_decay") = 0.0,
           nb::arg("nesterov") = false);
  nb::class_<optim::AdamW, optim::Optimizer>(m, "AdamW")
      .def("__init__", [](optim::AdamW* self, nb::handle params, double lr, std::pair<double, double> betas, double eps,
                          double weight_decay) {
        new (self) optim::AdamW(parameter_list(params), {.lr = lr, .beta1 = betas.first, .beta2 = betas.second,
                                                         .eps = eps, .weight_decay = weight_decay});
      }, nb::arg("params"), nb::arg("lr") = 1e-3, nb::arg("betas") = std::make_pair(0.9, 0.999),
           nb::arg("eps") = 1e-8, nb::arg("weight_decay") = 1e-2);
}

}  // namespace remat::python
