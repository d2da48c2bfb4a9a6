// remat.Module (Linear, MLP, GPT, Llama) with activation checkpointing, the
// optimizers and safetensors (bindings.h). Checkpointing reads as Hugging
// Face's: model.gradient_checkpointing_enable(policy="cost",
// budget="64MiB"); model.checkpointing_report() is the latest step's
// figures as a dict, model.explain() the applied plan as one dict per node.
// Llama is bound as _remat.Llama; remat.nn.LlamaForCausalLM (python/remat/
// nn.py) puts Hugging Face's face on it (from_pretrained, labels).
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
#include "nn/llama.h"
#include "nn/llama_pretrained.h"
#include "nn/mlp.h"
#include "nn/module.h"
#include "nn/safetensors.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "optim/sgd.h"
#include "python/bindings.h"
#include "python/convert.h"
#include "scheduler/checkpointer.h"
#include "scheduler/plan.h"
#include "train/parse.h"

namespace remat::python {
namespace {

// One dict per node of the applied plan, as `remat explain` prints them.
nb::list explain(const nn::Module& model) {
  const scheduler::GraphProfile* graph = model.checkpointing_profile();
  const scheduler::Plan* plan = model.checkpointing_plan();
  REMAT_CHECK(graph && plan, "explain: no plan applied yet (checkpointing is off, or the latest step was the graph's "
              "profiling step: run one more step)");
  nb::list rows = profile_rows(*graph);
  for (size_t v = 0; v < rows.size(); ++v) {
    nb::dict row = nb::borrow<nb::dict>(rows[v]);
    row["decision"] = tag_word(plan->tags[v]);
    row["reason"] = plan->reasons[v];
  }
  return rows;
}

// What a GPT's call returns: (logits, loss) as nanoGPT's, and by name as
// Hugging Face's outputs (model(**batch).loss).
struct CausalLMOutput {
  Tensor logits;
  std::optional<Tensor> loss;
};

std::vector<Tensor> parameter_list(const nb::handle& params) {
  std::vector<Tensor> out;
  for (nb::handle p : params) out.push_back(nb::cast<Tensor>(p));
  return out;
}

// A Python policy held by a module's checkpointing, seen by the collector
// (PythonRule in convert.h): each module type's tp_traverse and tp_clear.
template <class T>
const scheduler::PlanOptions* module_options(const T& module) {
  return module.checkpointing_options();
}
template <class T>
PyType_Slot module_slots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(&rule_traverse<T, &module_options<T>>)},
    {Py_tp_clear, reinterpret_cast<void*>(&rule_clear<T, &module_options<T>>)},
    {0, nullptr}};

// Module: the tree, its parameters, and activation checkpointing.
void bind_module(nb::module_& m) {
  nb::class_<nn::Module>(m, "Module", "A module tree with named parameters and activation checkpointing",
                         nb::type_slots(module_slots<nn::Module>))
      .def("__call__", [](nn::Module& self, const Tensor& x) { return self.forward(x); })
      .def("forward", [](nn::Module& self, const Tensor& x) { return self.forward(x); })
      .def("parameters", &nn::Module::parameters)
      .def("named_parameters", &nn::Module::named_parameters)
      .def("train", [](nn::Module& self, bool on) -> nn::Module& { return self.train(on); }, nb::arg("mode") = true,
           nb::rv_policy::reference)
      .def("eval", [](nn::Module& self) -> nn::Module& { return self.eval(); }, nb::rv_policy::reference)
      .def("to", [](nn::Module& self, const std::string& device) -> nn::Module& {
        return self.to(device_named(device));
      }, nb::arg("device"), nb::rv_policy::reference, "moves the parameters to `device` (cpu, cuda, cuda:N)")
      .def("gradient_checkpointing_enable",
           [](nn::Module& self, nb::object policy, std::optional<Budget> budget, Rules must_keep,
              Rules must_recompute, Rules prefer_keep, Rules prefer_recompute) {
             self.gradient_checkpointing_enable(plan_options(
                 policy, budget, {std::move(must_keep), std::move(must_recompute), std::move(prefer_keep),
                                  std::move(prefer_recompute)}, "gradient_checkpointing_enable"));
           },
           nb::arg("policy") = "blocks", nb::arg("budget") = nb::none(), nb::arg("must_keep") = Rules{},
           nb::arg("must_recompute") = Rules{}, nb::arg("prefer_keep") = Rules{}, nb::arg("prefer_recompute") = Rules{},
           "checkpoint this module's forward: a policy from remat.scheduler.policy_names() (none, blocks, sqrt, cost, "
           "chain, milp, auto, dtr, save-matmuls, every-n-blocks:N, recompute-modules:attn,mlp,norm), or a callable "
           "rule(nodes) -> one 'keep' or 'recompute' per node (nodes: dicts of the profile, as Profile.rows(): name, "
           "op, block, inputs, output_bytes, read_by_backward, compute_bound, flops, forward_ms, replay_cost_ms, ...); "
           "budget in bytes or as "
           "'64MiB' (the policies that take one); rules (must_keep, must_recompute, prefer_keep, prefer_recompute): "
           "ops (gelu) or node-name globs (h.*.attn/*); each plan's warnings are Python warnings")
      .def("rehearse_checkpointing", [](nn::Module& self, nb::callable step) {
        self.rehearse_checkpointing([&] { step(); });
      }, nb::arg("step"), "runs step() (this module's forward and the backward from its loss) once on the meta "
           "device and plans its graph, so that the next step runs under the plan (a budget then holds from the "
           "first step, and one below the graph's minimum is an error now); nothing when checkpointing is off")
      .def("gradient_checkpointing_disable", &nn::Module::gradient_checkpointing_disable)
      .def_prop_ro("is_gradient_checkpointing", &nn::Module::is_gradient_checkpointing)
      .def("checkpointing_report", [](const nn::Module& self) -> std::optional<nb::dict> {
        const auto report = self.checkpointing_report();
        if (!report) return std::nullopt;
        return report_dict(*report);
      }, "the latest step's figures (kept and dropped bytes, predicted and measured peak, replays), or None")
      .def("explain", &explain, "the applied plan: one dict per node, its profile's row (as Profile.rows()) with "
           "the plan's decision ('keep' or 'recompute') and its reason");
}

// Linear and MLP.
void bind_layers(nb::module_& m) {
  nb::class_<nn::Linear, nn::Module>(m, "Linear", nb::type_slots(module_slots<nn::Linear>))
      .def("__init__", [](nn::Linear* self, int64_t in, int64_t out, bool bias, uint64_t seed) {
        Generator g(seed);
        new (self) nn::Linear(in, out, bias, g);
      }, nb::arg("in_features"), nb::arg("out_features"), nb::arg("bias") = true, nb::arg("seed") = 0)
      .def_prop_ro("weight", &nn::Linear::weight)
      .def_prop_ro("bias", &nn::Linear::bias);

  nb::class_<nn::MLP, nn::Module>(m, "MLP", "Linear layers with ReLU between: sizes from input to output",
                                 nb::type_slots(module_slots<nn::MLP>))
      .def("__init__", [](nn::MLP* self, std::vector<int64_t> sizes, uint64_t seed) {
        Generator g(seed);
        new (self) nn::MLP(std::move(sizes), g);
      }, nb::arg("sizes"), nb::arg("seed") = 0);
}

// GPT and the (logits, loss) it returns.
void bind_gpt(nb::module_& m) {
  nb::class_<CausalLMOutput>(m, "CausalLMOutput", "(logits, loss), also by name; loss is None without targets")
      // By value: a member returned by reference would keep the whole output,
      // logits and all, alive through `loss = model(ids, labels).loss; loss.backward()`.
      .def_prop_ro("logits", [](const CausalLMOutput& o) { return o.logits; })
      .def_prop_ro("loss", [](const CausalLMOutput& o) { return o.loss; })
      .def("__len__", [](const CausalLMOutput&) { return 2; })
      .def("__iter__", [](const CausalLMOutput& o) { return nb::iter(nb::make_tuple(o.logits, o.loss)); })
      .def("__getitem__", [](const CausalLMOutput& o, int64_t i) -> nb::object {
        if (i == 0 || i == -2) return nb::cast(o.logits);
        if (i == 1 || i == -1) return nb::cast(o.loss);
        throw nb::index_error("CausalLMOutput: (logits, loss) has 2 items");
      });

  nb::class_<nn::GPT, nn::Module>(m, "GPT", "GPT-2's layout and parameter names", nb::type_slots(module_slots<nn::GPT>))
      .def("__init__",
           [](nn::GPT* self, int64_t vocab_size, int64_t block_size, int64_t n_layer, int64_t n_head, int64_t n_embd,
              double dropout, bool tie_weights, uint64_t seed, const std::string& dtype, const std::string& attention,
              const std::string& mlp) {
             REMAT_CHECK(dtype == "float32" || dtype == "float64", "GPT: dtype '{}': float32 or float64", dtype);
             new (self) nn::GPT({.vocab_size = vocab_size, .block_size = block_size, .n_layer = n_layer,
                                 .n_head = n_head, .n_embd = n_embd, .dropout = dropout, .tie_weights = tie_weights,
                                 .dtype = dtype == "float32" ? DType::Float32 : DType::Float64, .seed = seed,
                                 .attention = nn::parse_attention_path(attention), .mlp = nn::parse_mlp_path(mlp)});
           },
           nb::arg("vocab_size") = 256, nb::arg("block_size") = 128, nb::arg("n_layer") = 6, nb::arg("n_head") = 4,
           nb::arg("n_embd") = 256, nb::arg("dropout") = 0.0, nb::arg("tie_weights") = true, nb::arg("seed") = 0,
           nb::arg("dtype") = "float32", nb::arg("attention") = "fused", nb::arg("mlp") = "fused",
           "attention: 'fused' (the fused op) or 'explicit' (q k^T, causal softmax, product; also whenever dropout > "
           "0); mlp: 'fused' (c_proj of GELU as one op, GELU's output never kept) or 'explicit' (c_fc, gelu, c_proj)")
      .def("__call__", [](nn::GPT& self, const Tensor& ids, std::optional<Tensor> targets) {
        const nn::GPTOutput out = self.forward(ids, targets.value_or(Tensor()));
        return CausalLMOutput{out.logits, out.loss.defined() ? std::optional<Tensor>(out.loss) : std::nullopt};
      }, nb::arg("ids"), nb::arg("targets") = nb::none(),
           "(logits, loss), also as .logits and .loss: loss is None without targets. Under a checkpointing budget let the logits go before "
           "backward (loss = model(ids, targets)[1]): the plan counts on it, and logits held through backward add "
           "their bytes to the step's peak");
}

DType float_dtype(const std::string& dtype, const char* what) {
  REMAT_CHECK(dtype == "float32" || dtype == "float64", "{}: dtype '{}': float32 or float64", what, dtype);
  return dtype == "float32" ? DType::Float32 : DType::Float64;
}

// A LlamaConfig as a dict of Hugging Face's config.json keys (and remat's
// dtype and seed): what Llama's __init__ takes back as keywords.
nb::dict llama_config_dict(const nn::LlamaConfig& c) {
  nb::dict d;
  d["vocab_size"] = c.vocab_size;
  d["hidden_size"] = c.hidden_size;
  d["intermediate_size"] = c.intermediate_size;
  d["num_hidden_layers"] = c.num_hidden_layers;
  d["num_attention_heads"] = c.num_attention_heads;
  d["num_key_value_heads"] = c.kv_heads();
  d["max_position_embeddings"] = c.max_position_embeddings;
  d["rope_theta"] = c.rope_theta;
  d["rms_norm_eps"] = c.rms_norm_eps;
  d["tie_word_embeddings"] = c.tie_word_embeddings;
  d["initializer_range"] = c.initializer_range;
  d["dtype"] = c.dtype == DType::Float64 ? "float64" : "float32";
  d["seed"] = c.seed;
  return d;
}

// Llama (nn/llama.h) and Hugging Face folders (nn/llama_pretrained.h).
// Labels follow Hugging Face's convention (shifted inside, -100 ignored):
// the model's forward takes next-token targets, so the call shifts them
// with nn::shift_labels.
void bind_llama(nb::module_& m) {
  nb::class_<nn::Llama, nn::Module>(m, "Llama", "Hugging Face's LlamaForCausalLM: its config's and state_dict's "
                                    "names (remat.nn.LlamaForCausalLM adds from_pretrained)",
                                    nb::type_slots(module_slots<nn::Llama>))
      .def("__init__",
           [](nn::Llama* self, int64_t vocab_size, int64_t hidden_size, int64_t intermediate_size,
              int64_t num_hidden_layers, int64_t num_attention_heads, int64_t num_key_value_heads,
              int64_t max_position_embeddings, double rope_theta, double rms_norm_eps, bool tie_word_embeddings,
              double initializer_range, const std::string& dtype, uint64_t seed) {
             new (self) nn::Llama({.vocab_size = vocab_size, .hidden_size = hidden_size,
                                   .intermediate_size = intermediate_size, .num_hidden_layers = num_hidden_layers,
                                   .num_attention_heads = num_attention_heads,
                                   .num_key_value_heads = num_key_value_heads,
                                   .max_position_embeddings = max_position_embeddings, .rope_theta = rope_theta,
                                   .rms_norm_eps = rms_norm_eps, .tie_word_embeddings = tie_word_embeddings,
                                   .initializer_range = initializer_range, .dtype = float_dtype(dtype, "Llama"),
                                   .seed = seed});
           },
           nb::arg("vocab_size") = 32000, nb::arg("hidden_size") = 4096, nb::arg("intermediate_size") = 11008,
           nb::arg("num_hidden_layers") = 32, nb::arg("num_attention_heads") = 32,
           nb::arg("num_key_value_heads") = 0, nb::arg("max_position_embeddings") = 2048,
           nb::arg("rope_theta") = 10000.0, nb::arg("rms_norm_eps") = 1e-6, nb::arg("tie_word_embeddings") = false,
           nb::arg("initializer_range") = 0.02, nb::arg("dtype") = "float32", nb::arg("seed") = 0,
           "a Llama of random weights (N(0, initializer_range), norms 1); num_key_value_heads 0 means "
           "num_attention_heads")
      .def("__call__", [](nn::Llama& self, const Tensor& input_ids, std::optional<Tensor> labels) {
        const nn::LlamaOutput out = self.forward(input_ids, labels ? nn::shift_labels(*labels) : Tensor());
        return CausalLMOutput{out.logits, out.loss.defined() ? std::optional<Tensor>(out.loss) : std::nullopt};
      }, nb::arg("input_ids"), nb::arg("labels") = nb::none(),
           "input_ids int64 (B, T) -> (logits (B, T, V), loss), also as .logits and .loss; labels int64 (B, T) as "
           "Hugging Face's: position t predicts labels[:, t + 1], -100 is ignored, loss is the mean over the rest "
           "(None without labels)")
      .def("_forward_targets", [](nn::Llama& self, const Tensor& input_ids, std::optional<Tensor> targets) {
        const nn::LlamaOutput out = self.forward(input_ids, targets.value_or(Tensor()));
        return CausalLMOutput{out.logits, out.loss.defined() ? std::optional<Tensor>(out.loss) : std::nullopt};
      }, nb::arg("input_ids"), nb::arg("targets") = nb::none(), "the call with next-token targets (labels already "
           "shifted by _shift_labels): a rehearsal on the meta device shifts nothing inside it")
      .def_prop_ro("config", [](const nn::Llama& self) { return llama_config_dict(self.config()); },
                   "the configuration as a dict of config.json's keys (num_key_value_heads resolved)")
      .def("_load_weights", [](nn::Llama& self, const std::string& folder) { nn::load_llama_weights(self, folder); },
           nb::arg("folder"), "the weights of a Hugging Face folder into this model, all or nothing")
      .def("save_pretrained", [](const nn::Llama& self, const std::string& folder, const Budget& max_shard_size) {
        const int64_t* bytes = std::get_if<int64_t>(&max_shard_size);
        nn::save_llama_pretrained(self, folder, bytes ? *bytes : train::parse_bytes(std::get<std::string>(
                                                                     max_shard_size), "max_shard_size"));
      }, nb::arg("save_directory"), nb::arg("max_shard_size") = Budget{int64_t{5'000'000'000}},
           "config.json and the weights (model.safetensors, or shards of at most max_shard_size bytes, a number "
           "or text such as '64MiB', and model.safetensors.index.json), as LlamaForCausalLM.save_pretrained "
           "writes them");
  m.def("_shift_labels", &nn::shift_labels, nb::arg("labels"), "Hugging Face's labels (B, T) as next-token targets: "
        "out[:, t] = labels[:, t + 1], out[:, T - 1] = -100");
  m.def("_budget_share", [](const Budget& budget) { return budget_share(budget); }, nb::arg("budget"),
        "0.5 for '50%' (an error outside (0, 100]%), None for a budget in bytes");
  m.def("_llama_config", [](const std::string& folder, const std::string& dtype, uint64_t seed) {
    return llama_config_dict(nn::load_llama_config(folder, float_dtype(dtype, "from_pretrained"), seed));
  }, nb::arg("folder"), nb::arg("dtype") = "float32", nb::arg("seed") = 0,
        "FOLDER/config.json as Llama's keywords; errors name the key remat's Llama does not compute");
}

// .safetensors files: a module's parameters, or tensors by name.
void bind_safetensors(nb::module_& m) {
  m.def("save_safetensors", [](const nn::Module& module, const std::string& path) { nn::save_safetensors(module, path); },
        "the module's parameters to a .safetensors file (Hugging Face's GPT-2 names for GPT)");
  m.def("load_safetensors", [](nn::Module& module, const std::string& path) { nn::load_safetensors(module, path); },
        "the file's tensors into the module's parameters of the same names, all or nothing");
  m.def("read_safetensors", [](const std::string& path) {
    nb::dict out;
    for (const auto& [name, t] : nn::read_safetensors(path)) out[name.c_str()] = t;
    return out;
  }, "every tensor of a .safetensors file, by name");
  m.def("write_safetensors", [](const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                                 const nn::SafetensorsMetadata& metadata) {
    nn::write_safetensors(path, tensors, metadata);
  }, nb::arg("path"), nb::arg("tensors"),
        nb::arg("metadata") = nn::SafetensorsMetadata{});
}

// Optimizer, SGD and AdamW.
void bind_optimizers(nb::module_& m) {
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

void bind_schedules(nb::module_& m) {
  // LR schedules, as PyTorch's LambdaLR with Hugging Face's factors
  // (optim/lr_schedule.h); optim.py names them as transformers does.
  nb::class_<optim::LRScheduler>(m, "LRScheduler", "the optimizer's lr along a schedule: step() after each "
                                 "optimizer step")
      .def("__init__", [](optim::LRScheduler* self, optim::Optimizer& optimizer, const std::string& kind,
                          int64_t warmup_steps, int64_t total_steps, double min_lr_ratio) {
        optim::ScheduleKind k;
        if (kind == "cosine") {
          k = optim::ScheduleKind::WarmupCosine;
        } else if (kind == "linear") {
          k = optim::ScheduleKind::WarmupLinear;
        } else {
          REMAT_CHECK(kind == "constant", "LRScheduler: kind '{}': cosine, linear or constant", kind);
          k = optim::ScheduleKind::WarmupConstant;
        }
        new (self) optim::LRScheduler(optimizer, k, {.warmup_steps = warmup_steps, .total_steps = total_steps,
                                                     .min_lr_ratio = min_lr_ratio});
      }, nb::arg("optimizer"), nb::arg("kind"), nb::arg("warmup_steps") = 0, nb::arg("total_steps") = 1,
           nb::arg("min_lr_ratio") = 0.0, nb::keep_alive<1, 2>())
      .def("step", &optim::LRScheduler::step)
      .def("get_last_lr", [](const optim::LRScheduler& s) { return std::vector<double>{s.last_lr()}; })
      .def_prop_ro("base_lr", &optim::LRScheduler::base_lr)
      .def_prop_ro("last_epoch", &optim::LRScheduler::current_step, "the step whose factor is applied now");
}

}  // namespace

void bind_nn(nb::module_& m) {
  bind_module(m);
  bind_layers(m);
  bind_gpt(m);
  bind_llama(m);
  bind_safetensors(m);
  bind_optimizers(m);
  bind_schedules(m);
}

}  // namespace remat::python
