// remat._remat's training layer (bindings.h): datasets and loaders, the
// Trainer with TrainingArguments (the Accelerator and LocalSGD are bound in
// accelerate.cpp, from bind_train). These are the
// raw C++ classes; python/remat/train.py gives them the course's Python
// shape (keyword arguments, `with` blocks, prepare(*objects), EvalPrediction).
//
// TrainingArguments cross as a dict and are read by the C++ JSON reader, so
// a Python keyword is checked by the same code, with the same messages, as
// a key of a JSON file or a --flag.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/gpt.h"
#include "python/bindings.h"
#include "train/accelerator.h"
#include "data/data_loader.h"
#include "data/fashion_mnist.h"
#include "train/limits.h"
#include "train/local_sgd.h"
#include "train/metrics.h"
#include "train/trainer.h"
#include "train/training_arguments.h"

namespace remat::python {
namespace {

using Json = nlohmann::ordered_json;

// A Python value as JSON: None, bool, int, float, str, lists and dicts of them.
Json json_of(nb::handle value, const std::string& where) {
  if (value.is_none()) return nullptr;
  if (nb::isinstance<nb::bool_>(value)) return nb::cast<bool>(value);
  if (nb::isinstance<nb::int_>(value)) {  // as a JSON file's reader holds it: unsigned when not negative
    uint64_t unsigned_value = 0;
    if (nb::try_cast<uint64_t>(value, unsigned_value)) return unsigned_value;
    int64_t signed_value = 0;
    REMAT_CHECK(nb::try_cast<int64_t>(value, signed_value), "{}: {} is out of the range of a 64-bit integer", where,
                nb::cast<std::string>(nb::str(value)));
    return signed_value;
  }
  if (nb::isinstance<nb::float_>(value)) return nb::cast<double>(value);
  if (nb::isinstance<nb::str>(value)) return nb::cast<std::string>(value);
  if (nb::isinstance<nb::dict>(value)) {
    Json object = Json::object();
    for (auto [key, item] : nb::borrow<nb::dict>(value)) {
      const std::string name = nb::cast<std::string>(nb::str(key));
      object[name] = json_of(item, where + "." + name);
    }
    return object;
  }
  if (nb::isinstance<nb::list>(value) || nb::isinstance<nb::tuple>(value)) {
    Json array = Json::array();
    for (nb::handle item : value) array.push_back(json_of(item, where));
    return array;
  }
  // NumPy's scalars (and arrays of one value), and paths.
  if (nb::hasattr(value, "dtype") && nb::hasattr(value, "ndim") && nb::hasattr(value, "item")) {
    const nb::object shape = value.attr("shape");
    REMAT_CHECK(nb::cast<int64_t>(value.attr("ndim")) == 0, "{}: an array of shape {}, not one value", where,
                nb::cast<std::string>(nb::str(nb::handle(shape))));
    return json_of(value.attr("item")(), where);
  }
  if (nb::hasattr(value, "__fspath__")) return json_of(nb::module_::import_("os").attr("fspath")(value), where);
  REMAT_FAIL("{}: a value of type {} (None, bool, int, float, str, a path, or lists and dicts of them)", where,
             nb::cast<std::string>(nb::str(value.type().attr("__name__"))));
}

nb::object python_of(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return nb::none();
    case Json::value_t::boolean: return nb::bool_(value.get<bool>());
    case Json::value_t::number_integer: return nb::int_(value.get<int64_t>());
    case Json::value_t::number_unsigned: return nb::int_(value.get<uint64_t>());
    case Json::value_t::number_float: return nb::float_(value.get<double>());
    case Json::value_t::string: return nb::str(value.get<std::string>().c_str());
    case Json::value_t::array: {
      nb::list list;
      for (const Json& item : value) list.append(python_of(item));
      return list;
    }
    case Json::value_t::object: {
      nb::dict dict;
      for (const auto& [key, item] : value.items()) dict[key.c_str()] = python_of(item);
      return dict;
    }
    default: REMAT_FAIL("a JSON value of type {} has no Python form here", value.type_name());
  }
}

nb::dict dict_of(const train::Metrics& metrics) {
  nb::dict d;
  for (const auto& [name, value] : metrics) d[name.c_str()] = value;
  return d;
}

train::Metrics metrics_of(nb::handle dict, const std::string& where) {
  REMAT_CHECK(nb::isinstance<nb::dict>(dict), "{}: returned a {}, not a dict of name -> number", where,
              nb::cast<std::string>(nb::str(dict.type().attr("__name__"))));
  train::Metrics metrics;
  for (auto [key, value] : nb::borrow<nb::dict>(dict)) {
    const std::string name = nb::cast<std::string>(nb::str(key));
    double number = 0;
    REMAT_CHECK(nb::try_cast<double>(value, number), "{}: its value for '{}' is not a number", where, name);
    metrics.emplace_back(name, number);
  }
  return metrics;
}

// TrainingArguments from keyword arguments: every name known, every value
// in range (the same checks, and messages, as a JSON file's).
train::TrainingArguments arguments_of(const nb::dict& kwargs) {
  train::TrainingArguments args;
  train::apply_json(args, json_of(kwargs, "TrainingArguments"), "TrainingArguments");
  train::check(args);
  return args;
}

// A tensor from a remat.Tensor, or from anything remat.tensor takes.
Tensor tensor_of(nb::handle value) {
  Tensor t;
  if (nb::try_cast<Tensor>(value, t)) return t;
  return nb::cast<Tensor>(nb::module_::import_("remat").attr("tensor")(value));
}

// What the model computes for a batch: a GPT takes its targets and gives
// the loss; any other module is a classifier under cross-entropy.
train::ForwardFn forward_of(nn::Module& model) {
  if (dynamic_cast<nn::GPT*>(&model) == nullptr) return train::classifier_forward();
  return [](nn::Module& m, const data::Batch& batch) {
    return train::ModelOutput{static_cast<nn::GPT&>(m).forward(batch.inputs, batch.targets).loss, Tensor()};
  };
}

// The Python objects a Trainer calls: compute_metrics (a callable(predictions,
// label_ids, loss) -> dict, from train.py, which builds the user's
// EvalPrediction) and on_log. Held here, where the garbage collector can see
// them (PyTrainer's tp_traverse): a callable reaches its module's globals,
// which often hold the trainer itself.
struct Hooks {
  nb::object compute_metrics;
  nb::object on_log;
  // What stopped training between steps, raised again once it has stopped:
  // KeyboardInterrupt, or whatever a signal handler raised.
  std::optional<nb::python_error> stopped_by;
  bool in_call = false;  // inside train() or evaluate()
};

// compute_metrics: "classification", "language_model", None, or the callable in hooks.
train::ComputeMetrics metrics_fn(nb::handle metrics, const std::shared_ptr<Hooks>& hooks) {
  if (metrics.is_none()) return {};
  if (nb::isinstance<nb::str>(metrics)) {
    const std::string name = nb::cast<std::string>(metrics);
    if (name == "classification") return train::classification_metrics;
    if (name == "language_model") return train::language_model_metrics;
    REMAT_FAIL("compute_metrics '{}': classification, language_model, or a callable", name);
  }
  hooks->compute_metrics = nb::borrow<nb::object>(metrics);
  return [hooks](const train::EvalPrediction& p) {
    nb::gil_scoped_acquire gil;
    REMAT_CHECK(hooks->compute_metrics.is_valid(), "compute_metrics: released (the Trainer is being collected)");
    nb::object predictions = p.predictions.defined() ? nb::cast(p.predictions) : nb::none();
    nb::object labels = p.label_ids.defined() ? nb::cast(p.label_ids) : nb::none();
    return metrics_of(hooks->compute_metrics(predictions, labels, p.loss), "compute_metrics");
  };
}

// Logs go to on_log when given (else the Trainer prints them). Ctrl-C, an
// exception a signal handler raises, or one on_log raises (a signal's
// handler may run inside it) stops training after the step it interrupted
// (saved first, when saving is on), then raises that exception.
train::TrainerCallbacks callbacks_of(nb::handle on_log, const std::shared_ptr<Hooks>& hooks) {
  train::TrainerCallbacks callbacks;
  if (!on_log.is_none()) {
    hooks->on_log = nb::borrow<nb::object>(on_log);
    callbacks.on_log = [hooks](const train::Metrics& metrics) {
      nb::gil_scoped_acquire gil;
      if (!hooks->on_log.is_valid()) return;
      try {
        hooks->on_log(dict_of(metrics));
      } catch (nb::python_error& error) {  // stop as between steps
        if (!hooks->stopped_by) hooks->stopped_by.emplace(std::move(error));
      }
    };
  }
  callbacks.should_stop = [hooks](int64_t) {
    nb::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0 && !hooks->stopped_by) hooks->stopped_by.emplace();  // takes the raised error
    PyErr_Clear();
    return hooks->stopped_by.has_value();
  };
  return callbacks;
}

// The C++ Trainer and what it calls. The model and datasets are kept alive
// by keep_alive; the hooks are traversed by the collector (trainer_slots).
class PyTrainer {
 public:
  PyTrainer(nn::Module& model, const nb::dict& args, const data::Dataset& train_dataset,
            const data::Dataset* eval_dataset, nb::handle compute_metrics, nb::handle on_log)
      : hooks_(std::make_shared<Hooks>()),
        trainer_(model, arguments_of(args), train_dataset, eval_dataset, metrics_fn(compute_metrics, hooks_),
                 forward_of(model), callbacks_of(on_log, hooks_)) {}

  nb::dict train() {
    const StopScope scope(*hooks_);
    const train::TrainOutput out = trainer_.train();
    scope.raise_if_stopped();
    nb::dict d;
    d["global_step"] = out.global_step;
    d["training_loss"] = out.training_loss;
    d["metrics"] = dict_of(out.metrics);
    d["resumed_at_step"] = out.resumed_at_step;
    return d;
  }
  nb::dict evaluate(const data::Dataset* dataset, const std::string& prefix) {
    // Called from a hook while train() runs: what on_log raises is train()'s to raise.
    if (hooks_->in_call) return dict_of(trainer_.evaluate(dataset, prefix));
    const StopScope scope(*hooks_);
    const train::Metrics metrics = trainer_.evaluate(dataset, prefix);
    scope.raise_if_stopped();  // what on_log raised as the metrics were logged
    return dict_of(metrics);
  }
  nb::tuple predict(const data::Dataset& dataset) {
    const train::PredictionOutput out = trainer_.predict(dataset);
    const auto or_none = [](const Tensor& t) { return t.defined() ? nb::cast(t) : nb::none(); };
    return nb::make_tuple(or_none(out.predictions), or_none(out.label_ids), dict_of(out.metrics));
  }
  train::Trainer& get() { return trainer_; }
  Hooks& hooks() { return *hooks_; }

 private:
  // One call of train() or evaluate(): what stops it is kept for it alone,
  // and let go of however the call ends.
  class StopScope {
   public:
    explicit StopScope(Hooks& hooks) : hooks_(hooks) {
      hooks_.stopped_by.reset();
      hooks_.in_call = true;
    }
    ~StopScope() {
      hooks_.stopped_by.reset();
      hooks_.in_call = false;
    }
    StopScope(const StopScope&) = delete;
    StopScope& operator=(const StopScope&) = delete;
    void raise_if_stopped() const {
      if (!hooks_.stopped_by) return;
      nb::python_error error = std::move(*hooks_.stopped_by);
      hooks_.stopped_by.reset();
      throw error;
    }

   private:
    Hooks& hooks_;
  };

  std::shared_ptr<Hooks> hooks_;
  train::Trainer trainer_;
};

int trainer_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  Hooks& hooks = nb::inst_ptr<PyTrainer>(self)->hooks();
  Py_VISIT(hooks.compute_metrics.ptr());
  Py_VISIT(hooks.on_log.ptr());
  return 0;
}

int trainer_clear(PyObject* self) {
  Hooks& hooks = nb::inst_ptr<PyTrainer>(self)->hooks();
  hooks.compute_metrics.reset();
  hooks.on_log.reset();
  return 0;
}

PyType_Slot trainer_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(trainer_traverse)},
                               {Py_tp_clear, reinterpret_cast<void*>(trainer_clear)},
                               {0, nullptr}};

// Dataset, load_fashion_mnist, Batch and the data loader.
void bind_data(nb::module_& m) {
  nb::class_<data::Dataset>(m, "Dataset", "inputs (N, ...) and targets (N, ...): row i of each is example i")
      .def("__init__", [](data::Dataset* self, nb::handle inputs, nb::handle targets) {
        const Tensor x = tensor_of(inputs), y = tensor_of(targets);
        REMAT_CHECK(x.dim() >= 1 && y.dim() >= 1 && x.size(0) == y.size(0), "Dataset: inputs {} and targets {} "
                    "must have the same number of rows (axis 0)", x.str(), y.str());
        new (self) data::Dataset{x, y};
      }, nb::arg("inputs"), nb::arg("targets"))
      .def_ro("inputs", &data::Dataset::inputs)
      .def_ro("targets", &data::Dataset::targets)
      .def("__len__", &data::Dataset::size)
      .def("select", [](const data::Dataset& d, std::vector<int64_t> rows) { return data::select_rows(d, rows); },
           nb::arg("indices"), "rows `indices` of this dataset, in that order, as a dataset of their own")
      .def("__repr__", [](const data::Dataset& d) {
        return "remat.train.Dataset(inputs=" + d.inputs.str() + ", targets=" + d.targets.str() + ")";
      });
  m.def("load_fashion_mnist", [](const std::string& split, const std::string& dir) {
    return data::load_fashion_mnist(split, dir);
  }, nb::arg("split") = "train", nb::arg("dir") = std::string(data::kFashionMnistDir),
        "Fashion-MNIST from Debian's dataset-fashion-mnist: images float32 (N, 784) in [0, 1], labels int64 (N)");

  nb::class_<data::Batch>(m, "Batch", "one batch: inputs and targets; unpacks as (inputs, targets), and as "
                          "keywords ids= and targets= for a GPT (model(**batch))")
      .def_ro("inputs", &data::Batch::inputs)
      .def_ro("targets", &data::Batch::targets)
      .def("__iter__", [](const data::Batch& b) { return nb::iter(nb::make_tuple(b.inputs, b.targets)); })
      .def("__len__", [](const data::Batch&) { return 2; })
      .def("keys", [](const data::Batch&) { return nb::make_tuple("ids", "targets"); })
      .def("__getitem__", [](const data::Batch& b, const std::string& key) {
        if (key == "ids" || key == "inputs") return b.inputs;
        if (key == "targets") return b.targets;
        throw nb::key_error(key.c_str());
      });

  nb::class_<data::DataLoader::Epoch>(m, "_Epoch")
      .def("__len__", &data::DataLoader::Epoch::size)
      .def("batch", &data::DataLoader::Epoch::batch);
  nb::class_<data::DataLoader>(m, "_DataLoader")
      .def("__init__", [](data::DataLoader* self, const data::Dataset& dataset, int64_t batch_size, bool shuffle,
                          uint64_t seed, bool drop_last) {
        new (self) data::DataLoader(dataset, {.batch_size = batch_size, .shuffle = shuffle, .seed = seed,
                                              .drop_last = drop_last});
      })
      .def("__len__", &data::DataLoader::size)
      .def("epoch", &data::DataLoader::epoch, nb::keep_alive<0, 1>())
      .def_prop_ro("batch_size", [](const data::DataLoader& l) { return l.options().batch_size; })
      .def_prop_ro("dataset", &data::DataLoader::dataset);
}

// TrainingArguments (as JSON both ways) and the metrics the Trainer computes.
void bind_training_arguments(nb::module_& m) {
  m.def("_training_arguments", [](const nb::dict& kwargs) { return python_of(train::to_json(arguments_of(kwargs))); },
        "every TrainingArguments field, defaults filled in, after the checks");
  m.def("_training_arguments_with_flags", [](const nb::dict& kwargs, const std::vector<std::string>& flags) {
        train::TrainingArguments args = arguments_of(kwargs);
        train::apply_flags(args, flags);
        train::check(args);
        return python_of(train::to_json(args));
      }, "the fields with command-line flags applied as the remat program reads them (--name value, --name=value)");
  m.def("_training_argument_name", [](const std::string& name) { return train::training_argument_name(name); });
  m.def("_classification_metrics", [](const Tensor& predictions, const Tensor& labels) {
    return dict_of(train::classification_metrics({.predictions = predictions, .label_ids = labels}));
  });
  m.def("_perplexity", &train::perplexity);
}

void bind_trainer(nb::module_& m) {
  nb::class_<PyTrainer>(m, "_Trainer", nb::type_slots(trainer_slots))
      .def(nb::init<nn::Module&, const nb::dict&, const data::Dataset&, const data::Dataset*, nb::handle,
                    nb::handle>(),
           nb::arg("model"), nb::arg("args"), nb::arg("train_dataset"), nb::arg("eval_dataset").none(),
           nb::arg("compute_metrics").none(), nb::arg("on_log").none(), nb::keep_alive<1, 2>(),
           nb::keep_alive<1, 4>(), nb::keep_alive<1, 5>())
      .def("train", &PyTrainer::train)
      .def("evaluate", &PyTrainer::evaluate, nb::arg("dataset").none(), nb::arg("prefix"))
      .def("predict", &PyTrainer::predict)
      .def_prop_ro("global_step", [](PyTrainer& t) { return t.get().global_step(); })
      .def_prop_ro("epoch", [](PyTrainer& t) { return t.get().epoch(); })
      .def_prop_ro("log_history", [](PyTrainer& t) { return python_of(t.get().log_history()); })
      .def_prop_ro("best_model_checkpoint", [](PyTrainer& t) -> std::optional<std::string> {
        const std::string& best = t.get().best_model_checkpoint();
        if (best.empty()) return std::nullopt;
        return best;
      });
}

}  // namespace

void bind_train(nb::module_& m) {
  bind_data(m);
  bind_training_arguments(m);
  bind_trainer(m);
  bind_accelerate(m);
}

}  // namespace remat::python
