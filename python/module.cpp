// The module remat._remat: its parts (bindings.h), its one exception,
// remat.Error, a RuntimeError carrying the engine's message unchanged (the
// values and shapes that were wrong, and file:line), and the CPU's threads
// and GEMM (torch's names: set_num_threads, get_num_threads).
#include <nanobind/stl/string.h>

#include "engine/error.h"
#include "kernels/cpu/gemm_library.h"
#include "kernels/cpu/parallel.h"
#include "python/bindings.h"

NB_MODULE(_remat, m) {
  using namespace remat::python;
  m.doc() = "remat: a C++20 autograd engine for efficient training (see the package remat)";
  nb::exception<remat::Error>(m, "Error", PyExc_RuntimeError);
  bind_tensor(m);
  bind_nn(m);
  bind_scheduler(m);
  bind_plans(m);
  bind_train(m);

  namespace cpu = remat::kernels::cpu;
  m.def("set_num_threads", &cpu::set_num_threads, nb::arg("threads"),
        "Threads for CPU kernels and GEMM (OpenMP's count), as torch.set_num_threads.");
  m.def("get_num_threads", &cpu::num_threads, "Threads CPU kernels and GEMM run on.");
  m.def("gemm_summary", &cpu::gemm_summary,
        "The CPU GEMM in use, as `remat --version` prints it: float32's library, kernels and why, float64's, "
        "threads.");
  m.def(
      "gemm_info",
      [] {
        const cpu::GemmInfo info = cpu::gemm_info();
        nb::dict out;
        out["float32"] = std::string(cpu::gemm_library_name(info.float32));
        out["library"] = info.library;
        out["kernels"] = info.kernels;
        out["kernels_isa"] = std::string(cpu::isa_name(info.kernel_level));
        out["cpu_isa"] = std::string(cpu::isa_name(info.cpu_level));
        out["choice"] = info.choice;
        out["float64"] = info.float64;
        out["runtime"] = info.runtime;
        out["threads"] = info.threads;
        return out;
      },
      "The CPU GEMM in use as a dict: the fields of remat bench --json's gemm.");
}
