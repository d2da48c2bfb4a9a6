// cpu_isa_level: CPUID through libgcc, which also checks that the OS saves
// the wider registers (XCR0).
#include "kernels/cpu/cpu_features.h"

namespace remat::kernels::cpu {

std::string_view isa_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::Avx512: return "AVX-512";
    case IsaLevel::Avx2: return "AVX2+FMA";
    case IsaLevel::Avx: return "AVX";
    case IsaLevel::Baseline: return "SSE";
  }
  return "?";
}

IsaLevel cpu_isa_level() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl")) {
    return IsaLevel::Avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return IsaLevel::Avx2;
  if (__builtin_cpu_supports("avx")) return IsaLevel::Avx;
  return IsaLevel::Baseline;
}

}  // namespace remat::kernels::cpu
