// The library behind GEMM and what it runs: BLIS, its kernels' instruction
// set and why. Not the GEMM front itself (gemm.h) and not the thread count
// (parallel.h). Read by `remat`'s `gemm:` line, bench's JSON, the Python
// module's remat.gemm_info() and the tests.
//
// Note [GEMM library]: GEMM is BLIS's (Debian's libblis, 0.9, its OpenMP
// build), called through its own interface with row and column strides.
// BLIS holds kernels for every x86-64 instruction set (one "sub-
// configuration" each) and takes the one it runs at its first call, from
// BLIS_ARCH_TYPE when that is set. remat sets it, for that first call only,
// to the sub-configuration of the widest instruction set the CPU's feature
// bits (CPUID) offer: skx for AVX-512, haswell for AVX2 with FMA,
// sandybridge for AVX, generic below. BLIS's own choice looks at model
// numbers and brand strings (an AVX-512 Xeon whose name it does not know
// gets AVX2 kernels), and the OpenBLAS this replaced chose from a table of
// CPU models too (Debian's 0.3.21 ran its SSE kernels on the AVX-512 Xeon
// of family 6, model 207) and was loaded by CBC's LAPACK before main()
// runs, out of remat's reach. BLIS is never loaded by another library of
// the process (Debian's libblas.so.3, whichever it is, is another file), and
// it starts only when remat first calls it, so this choice does not depend
// on load order. The choice happens while the kernels library loads (a
// static initialiser: before main(), or while Python imports the module),
// and the variable is put back as it was. BLIS itself runs one thread per
// call; remat's OpenMP threads, the pool of its own loops, each run a
// block of C (gemm.cpp). A BLIS_ARCH_TYPE the user set (a configuration's
// name or number) is kept where this CPU can run it, and GemmInfo::choice
// names it; one it cannot run, or that names nothing, is set aside, and
// choice says so. The
// measured candidates (OpenBLAS, BLIS, oneDNN, and the MKL of PyTorch) are
// in docs/gemm.md.
#pragma once

#include <string>
#include <string_view>

#include "kernels/cpu/cpu_features.h"

namespace remat::kernels::cpu {

struct GemmInfo {
  std::string library;  // "BLIS 0.9.0"
  std::string kernels;  // BLIS's sub-configuration in use: "skx", "haswell", "zen2", ...
  IsaLevel kernel_level = IsaLevel::Baseline;  // of `kernels`
  IsaLevel cpu_level = IsaLevel::Baseline;     // of this CPU (cpu_features.h)
  // How `kernels` was chosen: "cpu-features" (remat's, from CPUID; followed
  // by "; BLIS_ARCH_TYPE=... set aside: <why>" where the user's value named
  // no configuration this CPU can run), "BLIS_ARCH_TYPE=<value>" (the
  // user's), or "started before remat" (BLIS had run before remat chose).
  std::string choice;
  std::string runtime;  // BLIS's threading: "OpenMP"
  int threads = 1;      // the threads a GEMM runs on now (set_num_threads)
};

// BLIS's x86-64 sub-configurations by the widest instructions of their
// kernels ("skx" -> Avx512, "zen2" -> Avx2, "penryn" -> Baseline; unknown
// names: Baseline), and the one remat asks for on a CPU of `level`.
IsaLevel blis_config_level(std::string_view config);
std::string_view blis_config_for(IsaLevel level);

GemmInfo gemm_info();

// "BLIS 0.9.0, haswell kernels (the CPU's AVX2+FMA, by CPUID), 2 threads"
std::string gemm_summary();

}  // namespace remat::kernels::cpu
