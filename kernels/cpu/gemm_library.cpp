// BLIS's sub-configuration chosen by CPU features before its first call
// (Note [GEMM library] in gemm_library.h), and what it says of itself.
#include "kernels/cpu/gemm_library.h"

#include <blis.h>

#include <array>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
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

// The configuration a user's BLIS_ARCH_TYPE names (a name, or BLIS's
// number of one), or nothing when it names none.
std::optional<int> user_arch(const std::string& value) {
  if (!value.empty() && value.find_first_not_of("0123456789") == std::string::npos) {
    const long id = std::strtol(value.c_str(), nullptr, 10);
    if (id >= 0 && id < BLIS_NUM_ARCHS) return static_cast<int>(id);
    return std::nullopt;
  }
  return arch_id(value);
}

// Before BLIS's first call: BLIS_ARCH_TYPE as the CPU's features call for
// (or the user's, where this CPU can run it), BLIS started, the variable
// put back as it was. Returns how the configuration was chosen.
std::string start_blis() {
  const char* set = std::getenv("BLIS_ARCH_TYPE");
  const std::optional<std::string> before = set != nullptr ? std::optional<std::string>(set) : std::nullopt;
  const IsaLevel cpu = cpu_isa_level();
  std::optional<int> wanted = arch_id(blis_config_for(cpu));
  std::string choice = "cpu-features";
  if (before && !before->empty()) {
    const std::optional<int> user = user_arch(*before);
    if (!user) {
      choice = "cpu-features; BLIS_ARCH_TYPE=" + *before + " set aside: no such configuration";
    } else if (blis_config_level(bli_arch_string(static_cast<arch_t>(*user))) > cpu) {
      choice = "cpu-features; BLIS_ARCH_TYPE=" + *before + " set aside: this CPU cannot run it";
    } else {
      wanted = user;
      choice = "BLIS_ARCH_TYPE=" + *before;
    }
  }
  if (wanted) setenv("BLIS_ARCH_TYPE", std::to_string(*wanted).c_str(), 1);
  bli_init();
  if (before) {
    setenv("BLIS_ARCH_TYPE", before->c_str(), 1);
  } else {
    unsetenv("BLIS_ARCH_TYPE");
  }
  const int running = static_cast<int>(bli_arch_query_id());
  return wanted && running != *wanted ? "started before remat" : choice;
}

const std::string& started() {
  static const std::string choice = start_blis();  // thread-safe once
  return choice;
}

// At load time: before main() in a program, during the import in Python,
// where no other thread of remat's reads the environment while it is set.
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
  info.choice = started();
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
  constexpr std::string_view kByFeatures = "cpu-features";
  std::string why;
  if (!info.choice.starts_with(kByFeatures)) {
    why = info.choice + ", on this " + cpu + " CPU";
  } else {
    const std::string set_aside = info.choice.substr(kByFeatures.size());  // "; BLIS_ARCH_TYPE=... set aside: ..."
    const bool wide = info.kernel_level >= info.cpu_level;
    why = (wide ? "the CPU's " + cpu + ", by CPUID" : "narrower than this " + cpu + " CPU") + set_aside;
  }
  return info.library + ", " + info.kernels + " kernels (" + why + "), " + std::to_string(info.threads) + " thread" +
         (info.threads == 1 ? "" : "s");
}

}  // namespace remat::kernels::cpu
