// The emulated GPU's memory behind cuda_runtime.h: the arena of device
// memory (closed to the host except while device work runs, red zones,
// AddressSanitizer's poison), cudaMalloc and cudaFree, pinned host memory,
// and copies and memsets, queued on streams (streams.cpp); see Note [Device
// memory and streams] in device.cpp.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/emulation/control.h"
#include "kernels/cuda/emulation/emulator.h"
#include "kernels/cuda/emulation/runtime.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REMAT_EMULATION_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define REMAT_EMULATION_ASAN 1
#endif
#if REMAT_EMULATION_ASAN
#include <sanitizer/asan_interface.h>
#define REMAT_POISON(p, n) __asan_poison_memory_region((p), (n))
#define REMAT_UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define REMAT_POISON(p, n) ((void)(p), (void)(n))
#define REMAT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace remat_emulation {
namespace {

constexpr size_t kAlignment = 256;
constexpr size_t kRedZone = 256;
constexpr size_t kReserve = size_t{1} << 40;  // address space only
constexpr size_t kHugePage = size_t{2} << 20;

// --- settings ---------------------------------------------------------------

size_t parse_bytes(const char* text, size_t fallback) {
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  const std::string unit = end;
  double scale = 1;
  if (unit == "KiB") scale = 1024.0;
  else if (unit == "MiB") scale = 1024.0 * 1024;
  else if (unit == "GiB") scale = 1024.0 * 1024 * 1024;
  else if (!unit.empty()) scale = -1;
  if (!(value > 0) || scale < 0 || value * scale > static_cast<double>(kReserve)) {
    std::fprintf(stderr, "remat CUDA emulation: REMAT_EMULATED_GPU_MEMORY=%s is not a size such as 16GiB; using %zu "
                 "bytes\n", text, fallback);
    return fallback;
  }
  return static_cast<size_t>(value * scale);
}

// --- the arena ----------------------------------------------------------------

struct Allocation {
  size_t bytes;     // as asked
  size_t capacity;  // with alignment and red zone
};

struct Arena {
  char* base = nullptr;
  size_t limit = 0;  // the device's memory
  size_t end = 0;    // offsets below are handed out or free
  size_t in_use = 0, peak = 0;
  std::map<size_t, Allocation> live;  // offset -> allocation
  std::map<size_t, size_t> free;      // offset -> bytes
  int open_depth = 0;
  size_t open_bytes = 0;  // the extent made accessible
};

Arena g_arena;
struct sigaction g_previous_segv {};

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

void write_text(const char* text) {
  size_t n = 0;
  while (text[n] != '\0') ++n;
  (void)!write(2, text, n);
}

void on_segv(int signal, siginfo_t* info, void* context) {
  const auto* address = static_cast<const char*>(info->si_addr);
  if (g_arena.base != nullptr && address >= g_arena.base && address < g_arena.base + kReserve) {
    char text[160];
    const auto offset = static_cast<unsigned long long>(address - g_arena.base);
    // Formatted by hand: snprintf is not safe in a signal handler.
    const char* prefix = "remat CUDA emulation: host code touched device memory (arena offset 0x";
    size_t n = 0;
    for (const char* p = prefix; *p != '\0'; ++p) text[n++] = *p;
    char digits[20];
    int d = 0;
    unsigned long long v = offset;
    do {
      digits[d++] = "0123456789abcdef"[v % 16];
      v /= 16;
    } while (v != 0);
    while (d > 0) text[n++] = digits[--d];
    const char* suffix = "): read device memory with cudaMemcpy to the host, after the work that wrote it\n";
    for (const char* p = suffix; *p != '\0' && n + 1 < sizeof text; ++p) text[n++] = *p;
    text[n] = '\0';
    write_text(text);
  }
  // The previous handler (AddressSanitizer's, or the default) reports it.
  sigaction(SIGSEGV, &g_previous_segv, nullptr);
  if (!(g_previous_segv.sa_flags & SA_SIGINFO) && g_previous_segv.sa_handler == SIG_DFL) return;  // faults again
  if (g_previous_segv.sa_flags & SA_SIGINFO) {
    g_previous_segv.sa_sigaction(signal, info, context);
  } else if (g_previous_segv.sa_handler != SIG_IGN) {
    g_previous_segv.sa_handler(signal);
  }
}

Arena& arena() {
  if (g_arena.base == nullptr) {
    // 2 MiB aligned and in huge pages where the system allows: opening and
    // closing the arena then changes one page-table entry per 2 MiB instead
    // of 512 (W2's step spent 2.2 s in mprotect with 4 KiB pages).
    void* base = mmap(nullptr, kReserve + kHugePage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
      std::fprintf(stderr, "remat CUDA emulation: cannot reserve address space for device memory\n");
      std::abort();
    }
    g_arena.base = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(base), kHugePage));
    madvise(g_arena.base, kReserve, MADV_HUGEPAGE);
    g_arena.limit = parse_bytes(std::getenv("REMAT_EMULATED_GPU_MEMORY"), size_t{16} << 30);
    struct sigaction action {};
    action.sa_sigaction = on_segv;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_segv);
  }
  return g_arena;
}

void* arena_alloc(size_t bytes) {
  Arena& a = arena();
  const size_t capacity = round_up(std::max<size_t>(bytes, 1), kAlignment) + kRedZone;
  size_t offset = a.end;
  for (auto it = a.free.begin(); it != a.free.end(); ++it) {
    if (it->second >= capacity) {
      offset = it->first;
      const size_t rest = it->second - capacity;
      a.free.erase(it);
      if (rest > 0) a.free[offset + capacity] = rest;
      break;
    }
  }
  if (a.in_use + bytes > a.limit) return nullptr;
  if (offset == a.end) {
    if (a.end + capacity > kReserve) return nullptr;
    a.end += capacity;
    if (a.open_depth > 0) {  // grown while device work runs (never, today)
      a.open_bytes = round_up(a.end, kHugePage);
      mprotect(a.base, a.open_bytes, PROT_READ | PROT_WRITE);
    }
  }
  a.live[offset] = {bytes, capacity};
  a.in_use += bytes;
  a.peak = std::max(a.peak, a.in_use);
  REMAT_UNPOISON(a.base + offset, bytes);
  REMAT_POISON(a.base + offset + bytes, capacity - bytes);
  return a.base + offset;
}

// The allocation holding ptr, or live.end().
std::map<size_t, Allocation>::iterator find_allocation(const void* ptr) {
  Arena& a = arena();
  const auto* p = static_cast<const char*>(ptr);
  if (p < a.base || p >= a.base + a.end) return a.live.end();
  const size_t offset = static_cast<size_t>(p - a.base);
  auto it = a.live.upper_bound(offset);
  if (it == a.live.begin()) return a.live.end();
  --it;
  return offset < it->first + it->second.capacity ? it : a.live.end();
}

bool in_arena(const void* ptr) {
  const auto* p = static_cast<const char*>(ptr);
  return g_arena.base != nullptr && p >= g_arena.base && p < g_arena.base + kReserve;
}

std::string pointer_text(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

}  // namespace

DeviceAccess::DeviceAccess() {
  Arena& a = arena();
  if (a.open_depth++ == 0 && a.end > 0) {
    a.open_bytes = round_up(a.end, kHugePage);
    mprotect(a.base, a.open_bytes, PROT_READ | PROT_WRITE);
  }
}

DeviceAccess::~DeviceAccess() {
  Arena& a = g_arena;
  if (--a.open_depth == 0 && a.open_bytes > 0) {
    mprotect(a.base, a.open_bytes, PROT_NONE);
    a.open_bytes = 0;
  }
}

// --- shared with the emulator's other parts ---------------------------------

bool is_device_pointer(const void* ptr) {
  std::lock_guard lock(g_runtime_mutex);
  return find_allocation(ptr) != g_arena.live.end();
}

std::string check_device_range(const void* ptr, size_t bytes, const char* what) {
  std::lock_guard lock(g_runtime_mutex);
  auto it = find_allocation(ptr);
  if (it == g_arena.live.end()) {
    return std::string(what) + " at " + pointer_text(ptr) + " is not in device memory" +
           (in_arena(ptr) ? " (a freed allocation or a red zone)" : " (a host pointer?)");
  }
  const size_t offset = static_cast<size_t>(static_cast<const char*>(ptr) - g_arena.base) - it->first;
  if (offset + bytes > it->second.bytes) {
    return std::string(what) + " spans " + std::to_string(bytes) + " bytes from offset " + std::to_string(offset) +
           " of an allocation of " + std::to_string(it->second.bytes) + " bytes";
  }
  return "";
}

MemoryUse memory_use() {
  std::lock_guard lock(g_runtime_mutex);
  Arena& a = arena();
  return {a.in_use, a.peak, a.limit};
}

}  // namespace remat_emulation

// --- cuda_runtime.h: memory and copies ----------------------------------------

using namespace remat_emulation;

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  std::lock_guard lock(g_runtime_mutex);
  Arena& a = arena();
  *total = a.limit;
  *free = a.limit - a.in_use;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  std::lock_guard lock(g_runtime_mutex);
  if (device_count_setting() == 0) return set_error(cudaErrorNoDevice, "cudaMalloc");
  *ptr = arena_alloc(bytes);
  if (*ptr == nullptr) {
    return set_error(cudaErrorMemoryAllocation, std::to_string(bytes) + " bytes asked, " +
                                                    std::to_string(g_arena.in_use) + " of " +
                                                    std::to_string(g_arena.limit) + " in use");
  }
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  std::lock_guard lock(g_runtime_mutex);
  // As CUDA's: waits for all work of the device, which may still read it.
  const cudaError_t pending = cudaDeviceSynchronize();
  Arena& a = arena();
  auto it = find_allocation(ptr);
  if (it == a.live.end() || a.base + it->first != ptr) {
    return set_error(cudaErrorInvalidValue, "cudaFree(" + pointer_text(ptr) + "): not the start of a live device "
                                            "allocation (freed twice, or a host pointer)");
  }
  const size_t offset = it->first, capacity = it->second.capacity;
  a.in_use -= it->second.bytes;
  a.live.erase(it);
  REMAT_POISON(a.base + offset, capacity);
  // Give whole pages back to the system; merge with free neighbours.
  const size_t page = page_size();
  const size_t first = round_up(offset, page), last = (offset + capacity) / page * page;
  if (last > first) madvise(a.base + first, last - first, MADV_DONTNEED);
  size_t start = offset, bytes = capacity;
  auto next = a.free.lower_bound(offset);
  if (next != a.free.end() && next->first == offset + capacity) {
    bytes += next->second;
    next = a.free.erase(next);
  }
  if (next != a.free.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == start) {
      start = previous->first;
      bytes += previous->second;
      a.free.erase(previous);
    }
  }
  if (start + bytes == a.end) {
    a.end = start;
  } else {
    a.free[start] = bytes;
  }
  return pending;
}

namespace {
std::map<const char*, size_t>& pinned() {  // start -> bytes of each cudaMallocHost allocation (under g_runtime_mutex)
  static auto& allocations = *new std::map<const char*, size_t>;
  return allocations;
}

bool in_pinned(const void* ptr, size_t bytes) {
  const auto* p = static_cast<const char*>(ptr);
  auto it = pinned().upper_bound(p);
  if (it == pinned().begin()) return false;
  --it;
  return p + bytes <= it->first + it->second;
}
}  // namespace

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  std::lock_guard lock(g_runtime_mutex);
  *ptr = std::aligned_alloc(256, round_up(std::max<size_t>(bytes, 1), 256));
  if (*ptr == nullptr) return set_error(cudaErrorMemoryAllocation, "cudaMallocHost");
  pinned()[static_cast<const char*>(*ptr)] = std::max<size_t>(bytes, 1);
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  std::lock_guard lock(g_runtime_mutex);
  const cudaError_t pending = cudaDeviceSynchronize();  // a queued copy may still read it
  if (pinned().erase(static_cast<const char*>(ptr)) == 0) {
    return set_error(cudaErrorInvalidValue, "cudaFreeHost(" + pointer_text(ptr) + "): not a cudaMallocHost allocation");
  }
  std::free(ptr);
  return pending;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  std::lock_guard lock(g_runtime_mutex);  // the pinned map, which cudaMallocHost and cudaFreeHost change under it
  const bool dst_device = in_arena(dst), src_device = in_arena(src);
  if (kind == cudaMemcpyDefault) {
    kind = dst_device ? (src_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                      : (src_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  }
  const bool want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  std::string error;
  if (want_dst) error = check_device_range(dst, bytes, "the destination");
  else if (dst_device) error = "the destination is device memory, but the copy's kind says host";
  if (error.empty() && want_src) error = check_device_range(src, bytes, "the source");
  else if (error.empty() && src_device) error = "the source is device memory, but the copy's kind says host";
  if (!error.empty()) return set_error(cudaErrorInvalidValue, "cudaMemcpy of " + std::to_string(bytes) + " bytes: " + error);
  Task task;
  task.what = "cudaMemcpy of " + std::to_string(bytes) + " bytes";
  if ((kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost) && !in_pinned(src, bytes)) {
    // The host's bytes as they are now: the caller may reuse them on return.
    auto copy = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
    task.run = [dst, copy] {
      std::memcpy(dst, copy->data(), copy->size());
      return std::string();
    };
  } else {
    task.run = [dst, src, bytes] {
      std::memmove(dst, src, bytes);
      return std::string();
    };
  }
  return enqueue(stream, std::move(task));
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  std::lock_guard lock(g_runtime_mutex);
  const cudaError_t status = cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
  if (status != cudaSuccess) return status;
  return cudaStreamSynchronize(nullptr);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  const std::string error = check_device_range(ptr, bytes, "the memory");
  if (!error.empty()) return set_error(cudaErrorInvalidValue, "cudaMemset: " + error);
  return enqueue(stream, {"cudaMemset of " + std::to_string(bytes) + " bytes", [ptr, value, bytes] {
                            std::memset(ptr, value, bytes);
                            return std::string();
                          }});
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  std::lock_guard lock(g_runtime_mutex);
  const cudaError_t status = cudaMemsetAsync(ptr, value, bytes, nullptr);
  return status != cudaSuccess ? status : cudaStreamSynchronize(nullptr);
}
