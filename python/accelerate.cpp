// remat._remat's Accelerator and LocalSGD (bindings.h; called from
// bind_train, after the Trainer): the Accelerator with its accumulation
// window and the optimizer and schedule it prepares, and LocalSGD, each
// `with` block a scope object. python/remat/train.py gives them the course's
// Python shape.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "python/bindings.h"
#include "train/accelerator.h"
#include "data/data_loader.h"
#include "train/limits.h"
#include "train/local_sgd.h"

namespace remat::python {
namespace {

// accelerator.accumulate(model) as a `with` block: the C++ guard lives
// from __enter__ to __exit__.
class WindowScope {
 public:
  WindowScope(train::Accelerator& accelerator, nn::Module& model) : accelerator_(accelerator), model_(model) {}
  void enter() {
    REMAT_CHECK(!window_, "accumulate: this block is open already (one `with` per micro-batch)");
    window_.reset(new train::Accelerator::Window(accelerator_.accumulate(model_)));
  }
  void exit() { window_.reset(); }

 private:
  train::Accelerator& accelerator_;
  nn::Module& model_;
  std::unique_ptr<train::Accelerator::Window> window_;
};

// LocalSGD as a `with` block: made on __enter__, and on __exit__ ended
// with the last average, or without it when the block raised (the peers
// may never reach it).
class LocalSGDScope {
 public:
  LocalSGDScope(train::Accelerator& accelerator, nn::Module& model, train::LocalSGDOptions options)
      : accelerator_(accelerator), model_(model), options_(options) {}
  // A block never left (its object collected): no collective from the collector.
  ~LocalSGDScope() {
    if (guard_) guard_->abandon();
  }
  LocalSGDScope(const LocalSGDScope&) = delete;
  LocalSGDScope& operator=(const LocalSGDScope&) = delete;
  void enter() {
    REMAT_CHECK(!guard_, "LocalSGD: this block is open already");
    guard_ = std::make_unique<train::LocalSGD>(accelerator_, model_, options_);
  }
  void exit(bool raised) {
    if (!guard_) return;
    const std::unique_ptr<train::LocalSGD> guard = std::move(guard_);
    if (raised) {
      guard->abandon();
    } else {
      guard->finish();  // the last average (were it to throw, the guard ends without another)
    }
    steps_ = guard->steps();
    syncs_ = guard->syncs();
  }
  // Inside the block, the guard's counts; after it, its final ones.
  int64_t steps() const { return guard_ ? guard_->steps() : steps_; }
  int64_t syncs() const { return guard_ ? guard_->syncs() : syncs_; }
  train::LocalSGD& get() {
    REMAT_CHECK(guard_, "LocalSGD: use it inside its `with` block");
    return *guard_;
  }

 private:
  train::Accelerator& accelerator_;
  nn::Module& model_;
  train::LocalSGDOptions options_;
  std::unique_ptr<train::LocalSGD> guard_;
  int64_t steps_ = 0, syncs_ = 0;
};

// The Accelerator, its accumulation window, and the optimizer and schedule
// it prepares.
void bind_accelerator(nb::module_& m) {
  nb::class_<train::Accelerator>(m, "_Accelerator")
      .def("__init__", [](train::Accelerator* self, int64_t gradient_accumulation_steps, const std::string& device) {
        new (self) train::Accelerator({.gradient_accumulation_steps = gradient_accumulation_steps,
                                       .device = train::check_device(device, "Accelerator")});
      })
      .def_prop_ro("process_index", &train::Accelerator::rank)
      .def_prop_ro("num_processes", &train::Accelerator::num_processes)
      .def_prop_ro("is_main_process", &train::Accelerator::is_main_process)
      .def_prop_ro("device", [](const train::Accelerator& a) { return a.device().str(); })
      .def_prop_ro("sync_gradients", &train::Accelerator::sync_gradients)
      .def_prop_ro("gradient_accumulation_steps",
                   [](const train::Accelerator& a) { return a.options().gradient_accumulation_steps; })
      .def_prop_ro("optimizer_steps", &train::Accelerator::optimizer_steps)
      .def_prop_ro("allreduce_calls",
                   [](const train::Accelerator& a) { return a.communicator().stats().allreduce_calls; })
      .def("prepare_model", [](train::Accelerator& a, nn::Module& model) { a.prepare(model); },
           nb::keep_alive<1, 2>())  // the accelerator keeps a pointer to its model
      .def("prepare_loader", [](train::Accelerator& a, const data::DataLoader& loader) { return a.prepare(loader); })
      .def("prepare_optimizer", [](const train::Accelerator& a, optim::Optimizer& o) { return a.prepare(o); },
           nb::keep_alive<0, 1>(), nb::keep_alive<0, 2>())
      .def("prepare_scheduler", [](const train::Accelerator& a, optim::LRScheduler& s) { return a.prepare(s); },
           nb::keep_alive<0, 1>(), nb::keep_alive<0, 2>())
      .def("backward", &train::Accelerator::backward)
      .def("gather", &train::Accelerator::gather)
      .def("accumulate", [](train::Accelerator& a, nn::Module& model) { return new WindowScope(a, model); },
           nb::keep_alive<0, 1>(), nb::keep_alive<0, 2>());

  nb::class_<WindowScope>(m, "_Window")
      .def("__enter__", &WindowScope::enter)
      .def("__exit__", [](WindowScope& w, nb::args) { w.exit(); });
  nb::class_<train::PreparedOptimizer>(m, "PreparedOptimizer", "an optimizer that steps only when a window ends")
      .def("step", &train::PreparedOptimizer::step)
      .def("zero_grad", &train::PreparedOptimizer::zero_grad)
      .def_prop_rw("lr", [](const train::PreparedOptimizer& o) { return o.inner().lr(); },
                   [](train::PreparedOptimizer& o, double lr) { o.inner().set_lr(lr); });
  nb::class_<train::PreparedScheduler>(m, "PreparedScheduler", "a schedule that steps only when a window ends")
      .def("step", &train::PreparedScheduler::step)
      .def("get_last_lr", [](const train::PreparedScheduler& s) { return std::vector<double>{s.inner().last_lr()}; });
}

void bind_local_sgd(nb::module_& m) {
  nb::class_<LocalSGDScope>(m, "_LocalSGD")
      .def("__init__", [](LocalSGDScope* self, train::Accelerator& accelerator, nn::Module& model,
                          int64_t local_sgd_steps, bool enabled) {
        new (self) LocalSGDScope(accelerator, model, {.local_sgd_steps = local_sgd_steps, .enabled = enabled});
      }, nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>())
      .def("enter", &LocalSGDScope::enter)
      .def("exit", &LocalSGDScope::exit)
      .def("step", [](LocalSGDScope& s) { s.get().step(); })
      .def("finish", [](LocalSGDScope& s) { s.get().finish(); })
      .def_prop_ro("steps", &LocalSGDScope::steps)
      .def_prop_ro("syncs", &LocalSGDScope::syncs)
      .def_prop_ro("active", [](LocalSGDScope& s) { return s.get().active(); });
}

}  // namespace

void bind_accelerate(nb::module_& m) {
  bind_accelerator(m);
  bind_local_sgd(m);
}

}  // namespace remat::python
