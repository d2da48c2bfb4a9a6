// The Python module remat._remat (nanobind), in three parts, each binding
// one layer of the C++ API: tensor.cpp (Tensor, NumPy, the ops, autograd),
// nn.cpp (modules, checkpointing, optimizers, schedules, safetensors),
// scheduler.cpp (observing the engine, profiles, plans: the tour's view),
// train.cpp (TrainingArguments, Trainer, Accelerator, LocalSGD); module.cpp
// defines the module and turns remat::Error into remat.Error. The package
// python/remat/ puts a Python face on it (remat.tensor, no_grad).
#pragma once

#include <nanobind/nanobind.h>

namespace remat::python {

namespace nb = nanobind;

void bind_tensor(nb::module_& m);
void bind_nn(nb::module_& m);
void bind_scheduler(nb::module_& m);
void bind_train(nb::module_& m);

}  // namespace remat::python
