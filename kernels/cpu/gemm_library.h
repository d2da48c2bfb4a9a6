// The library behind GEMM and what it runs: BLIS or oneDNN for float32,
// chosen per kind of CPU from a table of measurements, BLIS for float64,
// and each one's kernels. Not the GEMM front itself (gemm.h) and not the
// thread count (parallel.h). Read by `remat`'s `gemm:` line, bench's JSON,
// the Python module's remat.gemm_info() and the tests.
//
// Note [GEMM library]: float32 GEMM runs on one of two libraries, both
// from Debian: BLIS (libblis 0.9, its OpenMP build, through its own
// interface with row and column strides) or oneDNN (libdnnl 2.6.3, its
// OpenMP build, dnnl_sgemm). float64 always runs on BLIS (oneDNN has no
// dgemm). Which one runs float32 is a row of kGemmChoices (gemm_library.cpp)
// picked by the CPU's widest instruction set as its CPUID feature bits say
// (cpu_features.h; never model numbers): oneDNN on AVX-512, BLIS below.
// Each row carries the measurements that decided it (docs/gemm.md has the
// tables and how to take them again). The choice never looks at a clock:
// the same CPU features give the same library on every run, and so the
// same bits (gemm.cpp's blocks of C do not depend on the thread count
// either). REMAT_GEMM=blis|onednn overrides the row; any other value is an
// error at the first GEMM naming it.
//
// Each library picks its kernels by CPUID: oneDNN itself (its JIT code,
// capped by ONEDNN_MAX_CPU_ISA or DNNL_MAX_CPU_ISA where the user sets it),
// BLIS from remat. BLIS holds kernels for every x86-64 instruction set (one
// "sub-configuration" each) and takes the one it runs at its first call,
// from BLIS_ARCH_TYPE when that is set. remat sets it, for that first call
// only, to the sub-configuration of the widest instruction set the CPU
// offers: skx for AVX-512, haswell for AVX2 with FMA, sandybridge for AVX,
// generic below. BLIS's own choice looks at model numbers and brand strings
// (an AVX-512 Xeon whose name it does not know gets AVX2 kernels), and the
// OpenBLAS this replaced chose from a table of CPU models too (Debian's
// 0.3.21 ran its SSE kernels on the AVX-512 Xeon of family 6, model 207)
// and was loaded by CBC's LAPACK before main() runs, out of remat's reach.
// BLIS and oneDNN are loaded by nothing but remat, and BLIS starts only when
// remat first calls it, so the choice does not depend on load order. BLIS's
// choice happens while the kernels library loads (a static initialiser:
// before main(), or while Python imports the module), and the variable is
// put back as it was. A BLIS_ARCH_TYPE the user set (a configuration's name
// or number) is kept where this CPU can run it, and GemmInfo::choice names
// it; one it cannot run, or that names nothing, is set aside, and choice
// says so.
//
// Neither library runs threads of its own: remat's OpenMP threads, the pool
// of its own loops, each run single-threaded library calls on blocks of C
// (gemm.cpp), and a GEMM called inside a parallel region runs on the
// calling thread. The candidates measured over time (OpenBLAS, BLIS,
// oneDNN, the MKL of PyTorch) are in docs/gemm.md.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "kernels/cpu/cpu_features.h"

namespace remat::kernels::cpu {

enum class GemmLibrary { Blis, OneDnn };
std::string_view gemm_library_name(GemmLibrary library);  // "blis", "onednn": REMAT_GEMM's values

// One row of the decision: on a CPU whose widest instructions are `cpu`,
// float32 GEMM runs on `library`, because of `measured` (the figures, in
// a line; docs/gemm.md has the tables).
struct GemmChoice {
  IsaLevel cpu;
  GemmLibrary library;
  std::string_view measured;
};
std::span<const GemmChoice> gemm_choices();  // one row per IsaLevel
GemmLibrary gemm_library_for(IsaLevel cpu);

// REMAT_GEMM's value as a library; anything but "blis" and "onednn" throws
// std::invalid_argument naming the value and the choices.
GemmLibrary parse_gemm_library(std::string_view value);

// The library float32 GEMM runs on: REMAT_GEMM's where it is set, else
// gemm_library_for(cpu_isa_level()); read once. Throws
// std::invalid_argument, at every call, where REMAT_GEMM names none.
GemmLibrary float32_gemm_library();

struct GemmInfo {
  GemmLibrary float32 = GemmLibrary::Blis;  // the library float32 GEMM runs on
  std::string library;  // its name and version: "oneDNN 2.6.3", "BLIS 0.9.0"
  // Its kernels: oneDNN's sgemm kernels ("avx512_core", "avx2", "avx",
  // "sse41") or BLIS's sub-configuration ("skx", "haswell", "zen2", ...).
  std::string kernels;
  IsaLevel kernel_level = IsaLevel::Baseline;  // of `kernels`
  IsaLevel cpu_level = IsaLevel::Baseline;     // of this CPU (cpu_features.h)
  // How library and kernels were chosen: "cpu-features" (remat's table and
  // the libraries' kernels, all by CPUID), or the user's settings that
  // changed it, joined by "; ": "REMAT_GEMM=blis", "BLIS_ARCH_TYPE=<value>",
  // "ONEDNN_MAX_CPU_ISA=<value>", "cpu-features; BLIS_ARCH_TYPE=... set
  // aside: <why>", "started before remat" (BLIS had run before remat chose).
  std::string choice;
  std::string float64;  // float64's library and kernels: "BLIS 0.9.0, skx kernels"
  std::string runtime;  // the float32 library's threading: "OpenMP"
  int threads = 1;      // the threads a GEMM runs on now (set_num_threads)
};

// BLIS's x86-64 sub-configurations by the widest instructions of their
// kernels ("skx" -> Avx512, "zen2" -> Avx2, "penryn" -> Baseline; unknown
// names: Baseline), and the one remat asks for on a CPU of `level`.
IsaLevel blis_config_level(std::string_view config);
std::string_view blis_config_for(IsaLevel level);

// Throws std::invalid_argument where REMAT_GEMM names no library.
GemmInfo gemm_info();

// "oneDNN 2.6.3, avx512_core kernels (chosen for AVX-512 CPUs, by CPUID;
// docs/gemm.md); float64: BLIS 0.9.0, skx kernels; 2 threads"
std::string gemm_summary();

}  // namespace remat::kernels::cpu
