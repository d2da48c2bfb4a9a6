// The float32 library chosen by CPU features from the measured table
// kGemmChoices, BLIS's sub-configuration chosen before its first call
// (Note [GEMM library] in gemm_library.h), and what both say of themselves.
#include "kernels/cpu/gemm_library.h"

#include <blis.h>
#include <oneapi/dnnl/dnnl.h>

#include <array>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cpu/gemm_blis.h"
#include "kernels/cpu/parallel.h"

namespace remat::kernels::cpu {
namespace {

// The decision, one row per kind of CPU, from the measurements of
// docs/gemm.md (AMD EPYC, family 25, model 17: Zen 4, 2 cores, 2026-12-07;
// remat's gemm at W1's, W2's and a Llama's 24 linear products and 96
// per-head attention products; GFLOP/s per CPU-second on one thread, peak
// 116.8). The AVX2 row is from an AVX2 CPU (AMD EPYC, family 25, model 1:
// Zen 3, 2 cores, 2026-12-07; 36 linear products, peak 89.8 on one
// thread), beside the same paths forced on the Zen 4. The AVX-512 row was
// measured again on an Intel Xeon (family 6, model 167, AMX; 36 products,
// one thread, by the wall clock).
constexpr std::array<GemmChoice, 4> kGemmChoices{{
    {.cpu = IsaLevel::Avx512,
     .library = GemmLibrary::OneDnn,
     .measured = "Zen 4: oneDNN avx512_core 93-110 GFLOP/s (0.80-0.94 of peak) at the 24 products, BLIS skx 68-99, "
                 "haswell 86-103: the fastest at 21, within 2% at 3; per-head 74-80 against 45-59. Intel Xeon (AMX): "
                 "oneDNN 137-188 (median 172) at 36 products, BLIS skx 146-175 (162)"},
    {.cpu = IsaLevel::Avx2,
     .library = GemmLibrary::Blis,
     .measured = "Zen 3: BLIS haswell 57-74 GFLOP/s (0.64-0.83 of peak) at the 36 products, as its zen3 kernels "
                 "(59-73); oneDNN avx2 30-37 at 8 of them (its no-copy kernel; the same on the Zen 4 forced to AVX2)"},
    {.cpu = IsaLevel::Avx,
     .library = GemmLibrary::Blis,
     .measured = "not measured (no AVX-only CPU at hand): BLIS's sandybridge kernels, as before oneDNN came"},
    {.cpu = IsaLevel::Baseline,
     .library = GemmLibrary::Blis,
     .measured = "not measured: BLIS's generic kernels, as before oneDNN came"},
}};

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

// REMAT_GEMM's library, or the table's for this CPU; an error message
// where REMAT_GEMM names no library.
struct Float32Choice {
  GemmLibrary library = GemmLibrary::Blis;
  std::string error;
};

Float32Choice choose_float32() {
  const char* set = std::getenv("REMAT_GEMM");
  if (set == nullptr || *set == '\0') return {.library = gemm_library_for(cpu_isa_level())};
  try {
    return {.library = parse_gemm_library(set)};
  } catch (const std::invalid_argument& e) {
    return {.error = e.what()};
  }
}

const Float32Choice& float32_choice() {
  static const Float32Choice choice = choose_float32();  // thread-safe once
  return choice;
}

// oneDNN's sgemm kernels for the instructions it may use (its JIT code is
// written for these four; wider sets such as avx512_core_bf16 run the
// avx512_core sgemm).
std::pair<std::string, IsaLevel> onednn_kernels() {
  const unsigned isa = dnnl_get_effective_cpu_isa();
  auto has = [isa](dnnl_cpu_isa_t set) { return (isa & set) == static_cast<unsigned>(set); };
  if (has(dnnl_cpu_isa_avx512_core)) return {"avx512_core", IsaLevel::Avx512};
  if (has(dnnl_cpu_isa_avx2)) return {"avx2", IsaLevel::Avx2};
  if (has(dnnl_cpu_isa_avx)) return {"avx", IsaLevel::Avx};
  return {"sse41", IsaLevel::Baseline};
}

std::string onednn_runtime(unsigned runtime) {
  switch (runtime) {
    case DNNL_RUNTIME_OMP: return "OpenMP";
    case DNNL_RUNTIME_TBB: return "TBB";
    case DNNL_RUNTIME_SEQ: return "sequential";
    case DNNL_RUNTIME_THREADPOOL: return "threadpool";
    default: return "runtime " + std::to_string(runtime);
  }
}

// The user's cap on oneDNN's instructions, as oneDNN reads it (ONEDNN_
// before DNNL_), or "" where none is set.
std::string onednn_isa_cap() {
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return std::string(name) + "=" + value;
  }
  return "";
}

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

std::string_view gemm_library_name(GemmLibrary library) {
  return library == GemmLibrary::OneDnn ? "onednn" : "blis";
}

std::span<const GemmChoice> gemm_choices() { return kGemmChoices; }

GemmLibrary gemm_library_for(IsaLevel cpu) {
  for (const GemmChoice& row : kGemmChoices) {
    if (row.cpu == cpu) return row.library;
  }
  return GemmLibrary::Blis;
}

GemmLibrary parse_gemm_library(std::string_view value) {
  for (GemmLibrary library : {GemmLibrary::Blis, GemmLibrary::OneDnn}) {
    if (value == gemm_library_name(library)) return library;
  }
  throw std::invalid_argument("REMAT_GEMM=" + std::string(value) +
                              " names no GEMM library: use blis or onednn, or unset it for the CPU's choice "
                              "(Note [GEMM library])");
}

GemmLibrary float32_gemm_library() {
  const Float32Choice& choice = float32_choice();
  if (!choice.error.empty()) throw std::invalid_argument(choice.error);
  return choice.library;
}

GemmInfo gemm_info() {
  GemmInfo info;
  info.float32 = float32_gemm_library();
  info.cpu_level = cpu_isa_level();
  const std::string blis_choice = started();
  const std::string blis = std::string("BLIS ") + bli_info_get_version_str();
  const std::string blis_kernels = bli_arch_string(bli_arch_query_id());
  info.float64 = blis + ", " + blis_kernels + " kernels";
  // The user's settings that changed the choice, and BLIS_ARCH_TYPE's
  // where it was set aside ("; BLIS_ARCH_TYPE=... set aside: <why>").
  std::vector<std::string> chosen_by;
  std::string set_aside;
  const char* remat_gemm = std::getenv("REMAT_GEMM");
  if (remat_gemm != nullptr && *remat_gemm != '\0') chosen_by.push_back(std::string("REMAT_GEMM=") + remat_gemm);
  constexpr std::string_view kByFeatures = "cpu-features";
  if (blis_choice.starts_with(kByFeatures)) {
    set_aside = blis_choice.substr(kByFeatures.size());
  } else {
    chosen_by.push_back(blis_choice);
  }
  if (info.float32 == GemmLibrary::OneDnn) {
    const dnnl_version_t* version = dnnl_version();
    info.library = "oneDNN " + std::to_string(version->major) + "." + std::to_string(version->minor) + "." +
                   std::to_string(version->patch);
    std::tie(info.kernels, info.kernel_level) = onednn_kernels();
    info.runtime = onednn_runtime(version->cpu_runtime);
    if (const std::string cap = onednn_isa_cap(); !cap.empty()) chosen_by.push_back(cap);
  } else {
    info.library = blis;
    info.kernels = blis_kernels;
    info.kernel_level = blis_config_level(blis_kernels);
    info.runtime = bli_info_get_enable_openmp() ? "OpenMP" : bli_info_get_enable_pthreads() ? "pthreads" : "none";
  }
  for (const std::string& part : chosen_by) info.choice += (info.choice.empty() ? "" : "; ") + part;
  if (info.choice.empty()) info.choice = kByFeatures;
  info.choice += set_aside;
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
    why = "chosen for " + cpu + " CPUs, by CPUID; docs/gemm.md" + set_aside;
    if (info.kernel_level < info.cpu_level) why += "; narrower than this CPU";
  }
  const std::string float64 = info.float32 == GemmLibrary::Blis ? "the same" : info.float64;
  return info.library + ", " + info.kernels + " kernels (" + why + "); float64: " + float64 + "; " +
         std::to_string(info.threads) + " thread" + (info.threads == 1 ? "" : "s");
}

}  // namespace remat::kernels::cpu
