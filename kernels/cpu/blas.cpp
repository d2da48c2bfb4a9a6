// Loading OpenBLAS with the core its CPU calls for; see Note [OpenBLAS core
// choice] in blas.h.
#include "kernels/cpu/blas.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "kernels/cpu/blas_symbols.h"

namespace remat::kernels::cpu {
namespace {

// The pkg-config libdir of the OpenBLAS built against (CMake), then the
// soname, which Debian's alternatives point at one of its builds.
#ifndef REMAT_OPENBLAS_LIBRARY
#define REMAT_OPENBLAS_LIBRARY "libopenblas.so.0"
#endif
constexpr std::array<const char*, 2> kCandidates{REMAT_OPENBLAS_LIBRARY, "libopenblas.so.0"};

struct Loaded {
  void* handle = nullptr;
  BlasSymbols symbols;
  BlasInfo info;
};

template <class F>
F symbol(void* handle, const char* name, const char* path) {
  void* address = dlsym(handle, name);
  if (address == nullptr) {
    throw std::runtime_error(std::string("blas: ") + path + " has no symbol " + name + " (not OpenBLAS?)");
  }
  return reinterpret_cast<F>(address);
}

// dlopen one library file and resolve its entry points; nullptr handle when
// the file cannot be opened (why: in `why`) or is not OpenBLAS.
Loaded open_library(const char* path, std::string& why) {
  Loaded loaded;
  loaded.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (loaded.handle == nullptr) {
    why = dlerror();
    return loaded;
  }
  try {
    BlasSymbols& s = loaded.symbols;
    s.sgemm = symbol<decltype(s.sgemm)>(loaded.handle, "cblas_sgemm", path);
    s.dgemm = symbol<decltype(s.dgemm)>(loaded.handle, "cblas_dgemm", path);
    s.set_num_threads = symbol<decltype(s.set_num_threads)>(loaded.handle, "openblas_set_num_threads", path);
    s.get_num_threads = symbol<decltype(s.get_num_threads)>(loaded.handle, "openblas_get_num_threads", path);
    s.get_corename = symbol<decltype(s.get_corename)>(loaded.handle, "openblas_get_corename", path);
    s.get_config = symbol<decltype(s.get_config)>(loaded.handle, "openblas_get_config", path);
  } catch (const std::runtime_error& e) {
    dlclose(loaded.handle);
    why = e.what();
    return {};
  }
  loaded.info.path = path;
  loaded.info.library = loaded.symbols.get_config();
  loaded.info.core = loaded.symbols.get_corename();
  return loaded;
}

// Whether some other library of the process has loaded `path` already (then
// a dlclose cannot unload it, and its core stays what it chose).
bool already_loaded(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (handle != nullptr) dlclose(handle);  // the reference NOLOAD took
  return handle != nullptr;
}

struct Opened {
  Loaded loaded;
  bool preloaded = false;
};

Opened open_first() {
  std::string tried;
  for (const char* path : kCandidates) {
    const bool preloaded = already_loaded(path);
    std::string why;
    Loaded loaded = open_library(path, why);
    if (loaded.handle != nullptr) return {std::move(loaded), preloaded};
    tried += std::string(tried.empty() ? "" : "; ") + path + ": " + why;
  }
  throw std::runtime_error("blas: cannot load OpenBLAS (" + tried + "); install libopenblas0-pthread");
}

// The most threads the library runs: its build's MAX_THREADS, which its
// configuration string names ("... MAX_THREADS=64"); it clamps larger
// requests to that. (Asking for more to see what it keeps would start them.)
int max_threads_of(const std::string& config) {
  const size_t at = config.find("MAX_THREADS=");
  if (at == std::string::npos) return 0;  // not said
  const int most = std::atoi(config.c_str() + at + std::string_view("MAX_THREADS=").size());
  return most > 0 ? most : 0;
}

// REMAT_BLAS_TEST_FIRST_CORETYPE (defined only for the test program
// blas_reload_probe) makes the first load pick that core, as a mis-detecting
// OpenBLAS would, so that a CPU OpenBLAS knows can run the reload.
Loaded load() {
  const IsaLevel cpu = cpu_isa_level();
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
#ifdef REMAT_BLAS_TEST_FIRST_CORETYPE
  if (forced == nullptr) setenv("OPENBLAS_CORETYPE", REMAT_BLAS_TEST_FIRST_CORETYPE, 1);
#endif
  Opened opened = open_first();
#ifdef REMAT_BLAS_TEST_FIRST_CORETYPE
  if (forced == nullptr) unsetenv("OPENBLAS_CORETYPE");
#endif
  Loaded loaded = std::move(opened.loaded);
  BlasInfo& info = loaded.info;
  info.detected = info.core;
  info.choice = forced != nullptr ? "OPENBLAS_CORETYPE" : "detected";
  const std::optional<std::string> core = forced ? std::nullopt : openblas_core_to_force(cpu, info.core);
  if (core && opened.preloaded) {
    info.choice = "preloaded";  // loaded by another library before remat could choose
  } else if (core) {
    // The environment variable is the library's documented way in; it is
    // taken back so that child processes choose for themselves. (Hence the
    // rule of blas.h: the first call comes while the process has one thread.)
    const std::string path = info.path, detected = info.detected;
    dlclose(loaded.handle);
    setenv("OPENBLAS_CORETYPE", core->c_str(), 1);
    std::string why;
    loaded = open_library(path.c_str(), why);
    unsetenv("OPENBLAS_CORETYPE");
    if (loaded.handle == nullptr) throw std::runtime_error("blas: cannot load " + path + " again: " + why);
    info.detected = detected;
    info.choice = openblas_core_level(info.core) >= cpu ? "cpu-features" : "reload-failed";
  }
  info.cpu_level = cpu;
  info.max_threads = max_threads_of(info.library);
  if (info.choice == "preloaded" || info.choice == "reload-failed") {
    std::fprintf(stderr, "remat: warning: OpenBLAS runs its %s kernels on this %s CPU (%s); set OPENBLAS_CORETYPE=%s "
                 "before the program starts\n", info.core.c_str(), std::string(isa_name(cpu)).c_str(),
                 info.choice == "preloaded" ? "another library loaded it first" : "it kept them when loaded again",
                 core->c_str());
  }
  return loaded;
}

const Loaded& library() {
  static const Loaded loaded = load();  // thread-safe once
  return loaded;
}

}  // namespace

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
  // libgcc's CPUID reading, which also checks that the OS saves the wider
  // registers (XCR0).
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

IsaLevel openblas_core_level(std::string_view core) {
  // OpenBLAS's x86-64 core names (openblas_get_corename) by the widest
  // instructions of their GEMM kernels. Excavator's reuse Piledriver's (AVX).
  constexpr std::array<std::pair<std::string_view, IsaLevel>, 11> kCores{{
      {"SkylakeX", IsaLevel::Avx512}, {"Cooperlake", IsaLevel::Avx512}, {"SapphireRapids", IsaLevel::Avx512},
      {"Haswell", IsaLevel::Avx2}, {"Zen", IsaLevel::Avx2},
      {"Sandybridge", IsaLevel::Avx}, {"Bulldozer", IsaLevel::Avx}, {"Piledriver", IsaLevel::Avx},
      {"Steamroller", IsaLevel::Avx}, {"Excavator", IsaLevel::Avx}, {"Prescott", IsaLevel::Baseline},
  }};
  for (const auto& [name, level] : kCores) {
    if (core.size() == name.size() && std::equal(core.begin(), core.end(), name.begin(), [](char a, char b) {
          return (a | 0x20) == (b | 0x20);  // OpenBLAS's names vary in case between versions
        })) {
      return level;
    }
  }
  return IsaLevel::Baseline;
}

std::optional<std::string> openblas_core_to_force(IsaLevel cpu, std::string_view detected) {
  if (openblas_core_level(detected) >= cpu) return std::nullopt;
  switch (cpu) {
    case IsaLevel::Avx512: return "SkylakeX";
    case IsaLevel::Avx2: return "Haswell";
    case IsaLevel::Avx: return "Sandybridge";
    case IsaLevel::Baseline: return std::nullopt;
  }
  return std::nullopt;
}

const BlasSymbols& blas() { return library().symbols; }

BlasInfo blas_info() {
  BlasInfo info = library().info;
  info.threads = library().symbols.get_num_threads();
  return info;
}

std::string blas_summary() {
  const BlasInfo info = blas_info();
  const std::string cpu(isa_name(info.cpu_level));
  const std::string how =
      info.choice == "cpu-features"      ? "chosen for " + cpu + "; OpenBLAS detected " + info.detected
      : info.choice == "OPENBLAS_CORETYPE" ? "forced by OPENBLAS_CORETYPE"
      : info.choice == "preloaded"         ? "too narrow for " + cpu + ": loaded by another library first"
      : info.choice == "reload-failed"     ? "too narrow for " + cpu + ": kept when loaded again"
                                           : "detected";
  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." -> "OpenBLAS 0.3.21"
  std::string name = info.library;
  if (size_t second = name.find(' ', name.find(' ') + 1); second != std::string::npos) name.resize(second);
  return name + ", core " + info.core + " (" + how + "), " + std::to_string(info.threads) + " thread" +
         (info.threads == 1 ? "" : "s");
}

}  // namespace remat::kernels::cpu
