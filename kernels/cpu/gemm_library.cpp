// gemm_info: what oneDNN says of itself (Note [GEMM library] in
// gemm_library.h).
#include "kernels/cpu/gemm_library.h"

#include <oneapi/dnnl/dnnl.h>

#include <array>
#include <cstdlib>
#include <utility>

#include "kernels/cpu/parallel.h"

namespace remat::kernels::cpu {
namespace {

struct Isa {
  dnnl_cpu_isa_t value;
  std::string_view name;
  IsaLevel level;
};
constexpr std::array<Isa, 11> kIsas{{
    {dnnl_cpu_isa_sse41, "sse41", IsaLevel::Baseline},
    {dnnl_cpu_isa_avx, "avx", IsaLevel::Avx},
    {dnnl_cpu_isa_avx2, "avx2", IsaLevel::Avx2},
    {dnnl_cpu_isa_avx2_vnni, "avx2_vnni", IsaLevel::Avx2},
    // Xeon Phi's AVX-512 lacks BW, DQ and VL, which IsaLevel::Avx512 asks.
    {dnnl_cpu_isa_avx512_mic, "avx512_mic", IsaLevel::Avx2},
    {dnnl_cpu_isa_avx512_mic_4ops, "avx512_mic_4ops", IsaLevel::Avx2},
    {dnnl_cpu_isa_avx512_core, "avx512_core", IsaLevel::Avx512},
    {dnnl_cpu_isa_avx512_core_vnni, "avx512_core_vnni", IsaLevel::Avx512},
    {dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16", IsaLevel::Avx512},
    {dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx", IsaLevel::Avx512},
    {dnnl_cpu_isa_all, "all", IsaLevel::Baseline},
}};

const Isa* find_isa(unsigned isa) {
  for (const Isa& known : kIsas) {
    if (static_cast<unsigned>(known.value) == isa) return &known;
  }
  return nullptr;
}

// The user's limit on oneDNN's kernels, as "NAME=value", or "".
std::string isa_limit() {
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0') {
      return std::string(name) + "=" + value;
    }
  }
  return "";
}

}  // namespace

std::string_view dnnl_isa_name(unsigned isa) {
  const Isa* known = find_isa(isa);
  return known != nullptr ? known->name : "unknown";
}

IsaLevel dnnl_isa_level(unsigned isa) {
  const Isa* known = find_isa(isa);
  return known != nullptr ? known->level : IsaLevel::Baseline;
}

GemmInfo gemm_info() {
  GemmInfo info;
  const dnnl_version_t* version = dnnl_version();
  info.library = "oneDNN " + std::to_string(version->major) + "." + std::to_string(version->minor) + "." +
                 std::to_string(version->patch);
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  info.kernels = std::string(dnnl_isa_name(isa));
  info.kernel_level = dnnl_isa_level(isa);
  info.cpu_level = cpu_isa_level();
  const std::string limit = isa_limit();
  info.choice = limit.empty() ? "cpu-features" : limit;
  info.runtime = version->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP"
                 : version->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential"
                                                           : "runtime " + std::to_string(version->cpu_runtime);
  info.threads = version->cpu_runtime == DNNL_RUNTIME_SEQ ? 1 : num_threads();
  return info;
}

std::string gemm_summary() {
  const GemmInfo info = gemm_info();
  const std::string cpu(isa_name(info.cpu_level));
  std::string why;
  if (info.choice != "cpu-features") {
    why = "limited by " + info.choice + " on this " + cpu + " CPU";
  } else if (info.kernel_level >= info.cpu_level) {
    why = "the CPU's " + cpu + ", by CPUID";
  } else {
    why = "narrower than this " + cpu + " CPU";
  }
  return info.library + ", " + info.kernels + " kernels (" + why + "), " + std::to_string(info.threads) +
         " thread" + (info.threads == 1 ? "" : "s");
}

}  // namespace remat::kernels::cpu
