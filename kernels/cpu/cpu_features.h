// What vector instructions this CPU offers, read from CPUID feature bits
// (never from model numbers). Used to pick the float32 GEMM library's row
// of the measured table and BLIS's kernels, to check that the kernels use
// all of them (gemm_library.h), and to name the CPU in reports.
#pragma once

#include <string_view>

namespace remat::kernels::cpu {

// The widest vector instruction set a CPU offers (and its OS enables), as
// GEMM kernels use them: AVX-512 = F, CD, BW, DQ and VL; AVX2 with FMA.
enum class IsaLevel { Baseline = 0, Avx = 1, Avx2 = 2, Avx512 = 3 };
std::string_view isa_name(IsaLevel level);  // "AVX-512", "AVX2+FMA", "AVX", "SSE"

// This CPU's level, from CPUID feature bits.
IsaLevel cpu_isa_level();

}  // namespace remat::kernels::cpu
