// The library behind float GEMM and what it runs: oneDNN's sgemm, its
// kernels' instruction set and why. Not the GEMM front itself (gemm.h) and
// not the thread count (parallel.h). Read by `remat`'s `gemm:` line, bench's
// JSON, the Python module's remat.gemm_info() and the tests.
//
// Note [GEMM library]: float GEMM is oneDNN's dnnl_sgemm (Debian's libdnnl,
// 2.6). Its kernels are generated when the process runs (JIT) for the
// instruction set oneDNN reads from CPUID feature bits, so every x86-64 CPU
// gets kernels as wide as its features whatever its model, and nothing
// depends on what the process loaded before: no environment variable, no
// load order. The OpenBLAS it replaced chose its kernels from a table of CPU
// models (Debian's 0.3.21 ran its SSE kernels on the AVX-512 Xeon of family
// 6, model 207), and CBC's LAPACK loads that OpenBLAS before main() runs, so
// nothing remat did could change its choice. oneDNN's threads are OpenMP's,
// the runtime of remat's own loops: one pool for all the work. The measured
// candidates (OpenBLAS, BLIS, oneDNN, and the MKL of PyTorch) are in
// docs/gemm.md. Double GEMM (finite-difference checks) is remat's own loop
// (gemm.cpp). A user may narrow oneDNN's kernels with ONEDNN_MAX_CPU_ISA
// (or DNNL_MAX_CPU_ISA); GemmInfo::choice then names it.
#pragma once

#include <string>
#include <string_view>

#include "kernels/cpu/cpu_features.h"

namespace remat::kernels::cpu {

struct GemmInfo {
  std::string library;  // "oneDNN 2.6.3"
  std::string kernels;  // oneDNN's name for its kernels' instruction set: "avx2", "avx512_core_amx", ...
  IsaLevel kernel_level = IsaLevel::Baseline;  // of `kernels`
  IsaLevel cpu_level = IsaLevel::Baseline;     // of this CPU (cpu_features.h)
  // How `kernels` was chosen: "cpu-features" (oneDNN's reading of CPUID),
  // or "ONEDNN_MAX_CPU_ISA=<value>" (or DNNL_...) where the user limited it.
  std::string choice;
  std::string runtime;  // oneDNN's CPU threading: "OpenMP"
  int threads = 1;      // the threads a GEMM runs on now (set_num_threads)
};

// oneDNN's instruction sets (dnnl_cpu_isa_t values) by name and level:
// 0x7 -> "avx2", Avx2; 0x27 -> "avx512_core", Avx512; unknown -> Baseline.
std::string_view dnnl_isa_name(unsigned isa);
IsaLevel dnnl_isa_level(unsigned isa);

GemmInfo gemm_info();

// "oneDNN 2.6.3, avx2 kernels (the CPU's AVX2+FMA, by CPUID), 2 threads"
std::string gemm_summary();

}  // namespace remat::kernels::cpu
