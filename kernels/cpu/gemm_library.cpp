// BLIS's sub-configuration chosen by CPU features before its first call
// (Note [GEMM library] in gemm_library.h), and what it says of itself.
#include "kernels/cpu/gemm_library.h"

#include <blis.h>

#include <array>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "kernels/cpu/gemm_blis.h"
#include "kernels/cpu/parallel.h"

namespace remat::kernels::cpu {
namespace {

constexpr std::array<std::pair<std::string_view, IsaLevel>, 12> kConfigs{{
    {"skx", IsaLevel::Avx512},
    // Xeon Phi's AVX-512 lacks BW, DQ and VL, which IsaLevel::Avx512 asks.
    {"knl", IsaLevel::Avx2},
    {"haswell", IsaLevel::Avx2}, {"zen", IsaLevel::Avx2}, {"zen2", IsaLevel::Avx2}, {"zen3", IsaLevel::Avx2},
    {"sandybridge", IsaLevel::Avx}, {"excavator", IsaLevel::Avx}, {"steamroller", IsaLevel::Avx},
    {"piledriver", IsaLevel::Avx}, {"bulldozer", IsaLevel::Avx},
    {"penryn", IsaLevel::Baseline},
}};

// The arch_t id of a sub-configuration's name, as BLIS_ARCH_TYPE takes it.
std::optional<int> arch_id(std::string_view config) {
  for (int id = 0; id < BLIS_NUM_ARCHS; ++id) {
    if (config == bli_arch_string(static_cast<arch_t>(id))) return id;
  }
  return std::nullopt;
}

struct Choice {
  std::string choice;
};

// Before BLIS's first call: BLIS_ARCH_TYPE as the CPU's features call for
// (unless the user set it), BLIS started, the variable put back.
Choice start_blis() {
  const char* user = std::getenv("BLIS_ARCH_TYPE");
  if (user != nullptr && *user != '\0') {
    bli_init();
    return {std::string("BLIS_ARCH_TYPE=") + user};
  }
  const std::optional<int> wanted = arch_id(blis_config_for(cpu_isa_level()));
  if (wanted) setenv("BLIS_ARCH_TYPE", std::to_string(*wanted).c_str(), 1);
  bli_init();
  unsetenv("BLIS_ARCH_TYPE");
  const int running = static_cast<int>(bli_arch_query_id());
  return {wanted && running != *wanted ? "started before remat" : "cpu-features"};
}

const Choice& started() {
  static const Choice choice = start_blis();  // thread-safe once
  return choice;
}

// At load time, while the program (or the Python module's import) has one
// thread: setenv is not safe beside threads that read the environment.
[[maybe_unused]] const bool kStartedAtLoad = (started(), true);

}  // namespace

IsaLevel blis_config_level(std::string_view config) {
  for (const auto& [name, level] : kConfigs) {
    if (name == config) return level;
  }
  return IsaLevel::Baseline;
}

std::string_view blis_config_for(IsaLevel level) {
  switch (level) {
    case IsaLevel::Avx512: return "skx";
    case IsaLevel::Avx2: return "haswell";
    case IsaLevel::Avx: return "sandybridge";
    case IsaLevel::Baseline: return "generic";
  }
  return "generic";
}

void ensure_blis_started() { started(); }

GemmInfo gemm_info() {
  GemmInfo info;
  info.choice = started().choice;
  info.library = std::string("BLIS ") + bli_info_get_version_str();
  info.kernels = bli_arch_string(bli_arch_query_id());
  info.kernel_level = blis_config_level(info.kernels);
  info.cpu_level = cpu_isa_level();
  info.runtime = bli_info_get_enable_openmp() ? "OpenMP" : bli_info_get_enable_pthreads() ? "pthreads" : "none";
  info.threads = num_threads();
  return info;
}

std::string gemm_summary() {
  const GemmInfo info = gemm_info();
  const std::string cpu(isa_name(info.cpu_level));
  std::string why;
  if (info.choice != "cpu-features") {
    why = info.choice + ", on this " + cpu + " CPU";
  } else if (info.kernel_level >= info.cpu_level) {
    why = "the CPU's " + cpu + ", by CPUID";
  } else {
    why = "narrower than this " + cpu + " CPU";
  }
  return info.library + ", " + info.kernels + " kernels (" + why + "), " + std::to_string(info.threads) + " thread" +
         (info.threads == 1 ? "" : "s");
}

}  // namespace remat::kernels::cpu
