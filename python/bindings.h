// The Python module remat._remat (nanobind), in three parts, each binding
// one layer of the C++ API: tensor.cpp (Tensor, NumPy, the ops, autograd),
// nn.cpp (modules, checkpointing, optimizers, safetensors); module.cpp
// defines the module and turns remat::Error into remat.Error. The package
// python/remat/ puts a Python face on it (remat.tensor, no_grad).
#pragma once

#include <nanobind/nanobind.h>

namespace remat::python {

namespace nb = nanobind;

void bind_tensor(nb::module_& m);
void bind_nn(nb::module_& m);

}  // namespace remat::python
