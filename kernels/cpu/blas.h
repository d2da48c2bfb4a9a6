// The BLAS library behind gemm() and the thread count: OpenBLAS, loaded at
// first use with the kernels its CPU's instruction set calls for. Not the
// GEMM front itself (gemm.h) and not the elementwise threads (parallel.h).
//
// Note [OpenBLAS core choice]: Debian's OpenBLAS 0.3.21 picks its kernels
// ("core") from a table of CPU models and falls back to its slowest
// (Prescott) kernels on a model it does not know, such as the AVX-512 Xeon of
// family 6, model 207: 31 instead of ~150 GFLOP/s. It reads
// OPENBLAS_CORETYPE only when it loads, so remat loads it with dlopen, reads
// the core it chose, and where that core uses a narrower instruction set
// than the CPU's features (CPUID, never model numbers) offer, loads it again
// with the core for those features. A core the user forced through
// OPENBLAS_CORETYPE is left alone. remat is never linked to OpenBLAS, so
// that nothing loads it before this choice; where another library of the
// process (Debian's libblas.so.3 links it) has loaded it first, its core
// stays, and remat says so (choice "preloaded") and warns on stderr. The
// first call (any GEMM, set_num_threads or blas_info) sets an environment
// variable for a moment, so it belongs before other threads start: the
// `remat` program calls blas_info() first thing.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace remat::kernels::cpu {

// The widest vector instruction set a CPU offers (and its OS enables), as
// GEMM kernels use them: AVX-512 = F, CD, BW, DQ and VL; AVX2 with FMA.
enum class IsaLevel { Baseline = 0, Avx = 1, Avx2 = 2, Avx512 = 3 };
std::string_view isa_name(IsaLevel level);  // "AVX-512", "AVX2+FMA", "AVX", "SSE"

// This CPU's level, from CPUID feature bits.
IsaLevel cpu_isa_level();

// The instruction set an OpenBLAS core's kernels use ("SkylakeX" -> Avx512,
// "Zen" -> Avx2, "Prescott" -> Baseline); unknown names count as Baseline.
IsaLevel openblas_core_level(std::string_view core);

// The core to load instead of `detected` on a CPU of level `cpu`, or nothing
// when `detected` already uses all the CPU offers (Note [OpenBLAS core choice]).
std::optional<std::string> openblas_core_to_force(IsaLevel cpu, std::string_view detected);

struct BlasInfo {
  std::string library;    // "OpenBLAS 0.3.21" with its build options
  std::string path;       // the file loaded
  std::string core;       // the kernels in use, e.g. "SkylakeX", "Zen"
  std::string detected;   // the core OpenBLAS chose by itself
  // How core was chosen: "detected" (OpenBLAS's choice, wide enough),
  // "cpu-features" (loaded again with the core the CPU calls for),
  // "OPENBLAS_CORETYPE" (the user's), or, with the narrower core left in
  // place and a warning: "preloaded", "reload-failed".
  std::string choice;
  IsaLevel cpu_level = IsaLevel::Baseline;
  int threads = 1;        // BLAS's thread count now
  int max_threads = 0;    // the most threads this build of the library runs (0: it does not say)
};

// Loads the library on first use; a missing library is a std::runtime_error
// that says which files were tried.
BlasInfo blas_info();

// "OpenBLAS 0.3.21, core SkylakeX (chosen for AVX-512; OpenBLAS detected Prescott), 2 threads"
std::string blas_summary();

}  // namespace remat::kernels::cpu
