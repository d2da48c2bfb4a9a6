// The Python module remat._remat (nanobind), in parts, each binding one
// layer of the C++ API: tensor.cpp (Tensor, NumPy, the ops, autograd),
// nn.cpp (modules, checkpointing, optimizers, schedules, safetensors),
// scheduler.cpp (memory counts, observing and tagging the engine: the
// tour's view) and plans.cpp (profiles, plans, the Checkpointer),
// train.cpp (TrainingArguments, Trainer) and accelerate.cpp (Accelerator,
// LocalSGD); module.cpp defines the module and turns remat::Error into
// remat.Error. The package python/remat/ puts a Python face on it
// (remat.tensor, no_grad).
#pragma once

#include <nanobind/nanobind.h>

#include "engine/error.h"
#include "engine/recording.h"

namespace remat::python {

namespace nb = nanobind;

// A `with` block closed while a recording scope opened inside it is still
// open (manual __exit__ calls, a generator suspended inside a `with`): an
// error naming it, before anything closes (RecordingScope::open_on_this_thread).
inline void check_innermost(int open_at_entry, const char* what) {
  const int open = RecordingScope::open_on_this_thread();
  REMAT_CHECK(open == open_at_entry, "{}: closed while {} recording scope(s) opened inside it are still open; close "
              "those first", what, open - open_at_entry);
}

void bind_tensor(nb::module_& m);
void bind_nn(nb::module_& m);
void bind_scheduler(nb::module_& m);
void bind_plans(nb::module_& m);
void bind_train(nb::module_& m);
void bind_accelerate(nb::module_& m);  // from bind_train

}  // namespace remat::python
