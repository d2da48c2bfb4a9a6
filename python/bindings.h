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

namespace remat::python {

namespace nb = nanobind;

void bind_tensor(nb::module_& m);
void bind_nn(nb::module_& m);
void bind_scheduler(nb::module_& m);
void bind_plans(nb::module_& m);
void bind_train(nb::module_& m);
void bind_accelerate(nb::module_& m);  // from bind_train

}  // namespace remat::python
