// Loading OpenBLAS with the core its CPU calls for; see Note [OpenBLAS core
// choice] in blas.h.
#include "kernels/cpu/blas.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
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
// the file cannot be opened.
Loaded open_library(const char* path) {
  Loaded loaded;
  loaded.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (loaded.handle == nullptr) return loaded;
  BlasSymbols& s = loaded.symbols;
  s.sgemm = symbol<decltype(s.sgemm)>(loaded.handle, "cblas_sgemm", path);
  s.dgemm = symbol<decltype(s.dgemm)>(loaded.handle, "cblas_dgemm", path);
  s.set_num_threads = symbol<decltype(s.set_num_threads)>(loaded.handle, "openblas_set_num_threads", path);
  s.get_num_threads = symbol<decltype(s.get_num_threads)>(loaded.handle, "openblas_get_num_threads", path);
  s.get_corename = symbol<decltype(s.get_corename)>(loaded.handle, "openblas_get_corename", path);
  s.get_config = symbol<decltype(s.get_config)>(loaded.handle, "openblas_get_config", path);
  loaded.info.path = path;
  loaded.info.library = s.get_config();
  loaded.info.core = s.get_corename();
  return loaded;
}

Loaded open_first() {
  std::string tried;
  for (const char* path : kCandidates) {
    Loaded loaded = open_library(path);
    if (loaded.handle != nullptr) return loaded;
    tried += std::string(tried.empty() ? "" : "; ") + path + ": " + dlerror();
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

Loaded load() {
  const IsaLevel cpu = cpu_isa_level();
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  Loaded loaded = open_first();
  loaded.info.detected = loaded.info.core;
  loaded.info.choice = forced != nullptr ? "OPENBLAS_CORETYPE" : "detected";
  if (forced == nullptr) {
    if (const std::optional<std::string> core = openblas_core_to_force(cpu, loaded.info.core)) {
      // Unloaded for good only when no other handle holds it (nothing links
      // it); the environment variable is the library's documented way in,
      // and is taken back so that child processes choose for themselves.
      const std::string path = loaded.info.path, detected = loaded.info.detected;
      dlclose(loaded.handle);
      setenv("OPENBLAS_CORETYPE", core->c_str(), 1);
      loaded = open_library(path.c_str());
      unsetenv("OPENBLAS_CORETYPE");
      if (loaded.handle == nullptr) throw std::runtime_error("blas: cannot load " + path + " again: " + dlerror());
      loaded.info.detected = detected;
      loaded.info.choice = "cpu-features";
    }
  }
  loaded.info.cpu_level = cpu;
  loaded.info.max_threads = max_threads_of(loaded.info.library);
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
  std::string how = info.choice == "cpu-features"
                        ? "chosen for " + std::string(isa_name(info.cpu_level)) + "; OpenBLAS detected " + info.detected
                        : info.choice == "OPENBLAS_CORETYPE" ? "forced by OPENBLAS_CORETYPE" : "detected";
  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." -> "OpenBLAS 0.3.21"
  std::string name = info.library;
  if (size_t second = name.find(' ', name.find(' ') + 1); second != std::string::npos) name.resize(second);
  return name + ", core " + info.core + " (" + how + "), " + std::to_string(info.threads) + " thread" +
         (info.threads == 1 ? "" : "s");
}

}  // namespace remat::kernels::cpu
