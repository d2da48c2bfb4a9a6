// The module remat._remat: its parts (bindings.h) and its one exception,
// remat.Error, a RuntimeError carrying the engine's message unchanged (the
// values and shapes that were wrong, and file:line).
#include "python/bindings.h"

#include "engine/error.h"

NB_MODULE(_remat, m) {
  using namespace remat::python;
  m.doc() = "remat: a C++20 autograd engine for efficient training (see the package remat)";
  nb::exception<remat::Error>(m, "Error", PyExc_RuntimeError);
  bind_tensor(m);
  bind_nn(m);
  bind_scheduler(m);
  bind_train(m);
}
