// The emulated GPU's runtime: devices, memory, streams, events and errors
// behind cuda_runtime.h; see Note [Device memory and streams].
//
// Note [Device memory and streams]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Device memory is one arena of address space, reserved at the first call
// and kept inaccessible (PROT_NONE) except while device work runs, so that
// host code that dereferences a device pointer stops at once with a message
// naming the address (the SIGSEGV handler below), as it would on a GPU. An
// allocation is 256-byte aligned, as cudaMalloc's, and followed by a red
// zone; under AddressSanitizer the red zones and freed allocations are
// poisoned, so that a kernel reading past its tensor, or a freed one, is
// reported where it reads.
//
// Every stream keeps a queue. A launch, copy, cuBLAS or NCCL call queues its
// work and returns; the work runs, in queue order, when the host waits for
// it: cudaStreamSynchronize, cudaEventSynchronize, cudaStreamQuery, a copy
// to the host, cudaDeviceSynchronize, cudaFree (which waits for the whole
// device, as CUDA's does). cudaStreamWaitEvent queues a wait that first runs
// the other stream up to the event. The legacy stream (null) waits for every
// blocking stream and they for it; cudaStreamNonBlocking streams wait for
// nothing they were not told to. So work is never run earlier than a real
// GPU could run it, and host code that reads results without waiting for
// them reads nothing (the arena is closed). cudaEventQuery runs nothing: it
// says whether the work before the event has run (cudaErrorNotReady, not
// kept as the last error, until the host waited for it).
//
// A copy from pageable host memory to the device takes the host's bytes at
// the call (the caller may reuse them on return, as CUDA stages them); one
// from pinned memory (cudaMallocHost) reads them when the copy runs, as a
// GPU's DMA does, so that host code reusing a pinned buffer before the copy
// ran shows as wrong bytes. cudaFreeHost waits for the device first.
//
// An error found while device work runs (a deadlock, a bad warp collective,
// a kernel reading outside device memory found by a cuBLAS range check) is
// returned by the call that waited for it, with its message from
// cudaGetErrorString; unlike CUDA's, it does not spoil later work.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/emulation/control.h"
#include "kernels/cuda/emulation/emulator.h"

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

struct CUstream_st {
  int device = 0;
  bool blocking = true;  // waits for the legacy stream, and it for this one
  bool legacy = false;
  bool destroyed = false;
  struct Queued {
    remat_emulation::Task task;
    uint64_t issue = 0;  // position in the host's order of every queued call
    std::vector<std::pair<CUstream_st*, uint64_t>> waits;  // streams to run up to a point first
  };
  std::deque<Queued> queue;
  uint64_t queued = 0;  // tasks ever queued
  uint64_t done = 0;    // tasks run
};

struct CUevent_st {
  CUstream_st* stream = nullptr;
  uint64_t position = 0;  // done when stream->done reaches it
  uint64_t generation = 0;
  bool timing = true;
  bool destroyed = false;
  double at_ms = 0;  // the emulator's clock when it completed
};

namespace remat_emulation {
namespace {

using Clock = std::chrono::steady_clock;

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

int device_count_setting() {
  static const int count = [] {
    const char* text = std::getenv("REMAT_EMULATED_GPUS");
    if (text == nullptr) return 1;
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value < 0 || value > 8) {
      std::fprintf(stderr, "remat CUDA emulation: REMAT_EMULATED_GPUS=%s is not a count from 0 to 8; using 1\n", text);
      return 1;
    }
    return static_cast<int>(value);
  }();
  return count;
}

// --- errors -----------------------------------------------------------------

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;
std::mutex g_detail_mutex;
std::map<int, std::string> g_details;  // the latest message of each error

const char* plain_text(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchTimeout: return "the launch timed out and was terminated";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
  }
  return "unknown error";
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

std::recursive_mutex g_mutex;  // every stream, the arena, every task
Arena g_arena;
std::vector<std::unique_ptr<CUstream_st>> g_streams;  // kept to the end: events and waits point at them
std::vector<CUstream_st*> g_legacy;  // per device
uint64_t g_issue = 0;
const CUstream_st::Queued* g_running = nullptr;  // the task running now
CUstream_st* g_running_stream = nullptr;
struct sigaction g_previous_segv {};
const Clock::time_point g_epoch = Clock::now();

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

// While alive, device memory is accessible (nested: the outermost opens and closes).
class DeviceAccess {
 public:
  DeviceAccess() {
    Arena& a = arena();
    if (a.open_depth++ == 0 && a.end > 0) {
      a.open_bytes = round_up(a.end, kHugePage);
      mprotect(a.base, a.open_bytes, PROT_READ | PROT_WRITE);
    }
  }
  ~DeviceAccess() {
    Arena& a = g_arena;
    if (--a.open_depth == 0 && a.open_bytes > 0) {
      mprotect(a.base, a.open_bytes, PROT_NONE);
      a.open_bytes = 0;
    }
  }
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};

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

// --- streams --------------------------------------------------------------------

// The current device's legacy stream.
CUstream_st* legacy_stream() {
  const auto device = static_cast<size_t>(t_device);
  if (g_legacy.size() <= device) g_legacy.resize(device + 1, nullptr);
  if (g_legacy[device] == nullptr) {
    g_streams.push_back(std::make_unique<CUstream_st>());
    g_legacy[device] = g_streams.back().get();
    g_legacy[device]->legacy = true;
    g_legacy[device]->device = t_device;
  }
  return g_legacy[device];
}

std::string run_to(CUstream_st* s, uint64_t position);

// Runs one queued task (with its waits first); "" or its error.
std::string run_front(CUstream_st* s) {
  CUstream_st::Queued item = std::move(s->queue.front());
  s->queue.pop_front();
  std::string error;
  for (const auto& [other, position] : item.waits) {
    std::string e = run_to(other, position);
    if (error.empty()) error = std::move(e);
  }
  const CUstream_st::Queued* previous = g_running;
  CUstream_st* previous_stream = g_running_stream;
  g_running = &item;
  g_running_stream = s;
  std::string e = item.task.run();
  g_running = previous;
  g_running_stream = previous_stream;
  ++s->done;
  if (!e.empty()) {
    e = item.task.what + ": " + e;
    std::fprintf(stderr, "remat CUDA emulation: %s\n", e.c_str());
    set_error(item.task.code, e);
    if (error.empty()) error = std::move(e);
  }
  return error;
}

// Runs `s` until `position` tasks have run; the first error, if any.
std::string run_to(CUstream_st* s, uint64_t position) {
  DeviceAccess access;
  std::string error;
  while (s->done < position && !s->queue.empty()) {
    std::string e = run_front(s);
    if (error.empty()) error = std::move(e);
  }
  return error;
}

cudaError_t finish(const std::string& error) {
  if (error.empty()) return cudaSuccess;
  // Returned here once, not kept as the last error: unlike CUDA's
  // asynchronous errors, an emulated one does not spoil later calls.
  return std::exchange(t_last_error, cudaSuccess);  // set by run_front
}

std::string pointer_text(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

}  // namespace

// --- shared with threads.cpp, cublas.cpp, nccl.cpp ---------------------------

cudaError_t set_error(cudaError_t error, const std::string& detail) {
  t_last_error = error;
  std::lock_guard lock(g_detail_mutex);
  g_details[static_cast<int>(error)] = std::string(plain_text(error)) + ": " + detail;
  return error;
}

int current_device() { return t_device; }

bool is_device_pointer(const void* ptr) {
  std::lock_guard lock(g_mutex);
  return find_allocation(ptr) != g_arena.live.end();
}

std::string check_device_range(const void* ptr, size_t bytes, const char* what) {
  std::lock_guard lock(g_mutex);
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

cudaStream_t resolve(cudaStream_t stream) {
  std::lock_guard lock(g_mutex);
  if (stream == nullptr) return legacy_stream();
  return stream->destroyed ? nullptr : stream;
}

cudaError_t enqueue(cudaStream_t stream, Task task) {
  std::lock_guard lock(g_mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return set_error(cudaErrorInvalidResourceHandle, task.what + " on a destroyed stream");
  CUstream_st::Queued item{std::move(task), ++g_issue, {}};
  if (s->legacy) {
    for (const auto& other : g_streams) {
      if (other.get() != s && other->device == s->device && other->blocking && !other->destroyed) {
        item.waits.emplace_back(other.get(), other->queued);
      }
    }
  } else if (s->blocking) {
    const int current = std::exchange(t_device, s->device);
    CUstream_st* legacy = legacy_stream();
    t_device = current;
    item.waits.emplace_back(legacy, legacy->queued);
  }
  s->queue.push_back(std::move(item));
  ++s->queued;
  return cudaSuccess;
}

std::string unordered_earlier_work(cudaStream_t stream) {
  std::lock_guard lock(g_mutex);
  if (g_running == nullptr) return "";
  for (const auto& other : g_streams) {
    if (other.get() == g_running_stream || other->device != g_running_stream->device || other->queue.empty()) continue;
    const CUstream_st::Queued& first = other->queue.front();
    if (first.issue < g_running->issue) {
      return std::to_string(other->queue.size()) + " operation(s) queued earlier on another stream (first: " +
             first.task.what + ") have not run and nothing orders them before this one; make this stream wait "
             "for them (cudaStreamWaitEvent, or synchronise that stream first)";
    }
  }
  (void)stream;
  return "";
}

std::string check_stream_device(cudaStream_t stream, const char* what) {
  std::lock_guard lock(g_mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr || s->device == t_device) return "";
  return std::string(what) + " queued on a stream of device " + std::to_string(s->device) + " while device " +
         std::to_string(t_device) + " is current (cudaSetDevice to the stream's device first)";
}

MemoryUse memory_use() {
  std::lock_guard lock(g_mutex);
  Arena& a = arena();
  return {a.in_use, a.peak, a.limit};
}

}  // namespace remat_emulation

// --- cuda_runtime.h ---------------------------------------------------------------

using namespace remat_emulation;

cudaError_t cudaGetDeviceCount(int* count) {
  *count = device_count_setting();
  if (*count == 0) return set_error(cudaErrorNoDevice, "REMAT_EMULATED_GPUS=0");
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= device_count_setting()) {
    return set_error(cudaErrorInvalidDevice, "device " + std::to_string(device) + " of " +
                                                 std::to_string(device_count_setting()));
  }
  t_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = t_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device < 0 || device >= device_count_setting()) return set_error(cudaErrorInvalidDevice, "no such device");
  *prop = {};
  std::snprintf(prop->name, sizeof prop->name, "remat emulated GPU");
  {
    std::lock_guard lock(g_mutex);
    prop->totalGlobalMem = arena().limit;
  }
  prop->sharedMemPerBlock = size_t{48} << 10;
  prop->sharedMemPerBlockOptin = size_t{227} << 10;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->major = 9;  // the limits above are sm_90's
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->l2CacheSize = 50 << 20;
  prop->maxThreadsPerMultiProcessor = 2048;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() { return std::exchange(t_last_error, cudaSuccess); }
cudaError_t cudaPeekAtLastError() { return t_last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchTimeout: return "cudaErrorLaunchTimeout";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  // The latest message of this error, kept for the process (callers copy it).
  std::lock_guard lock(g_detail_mutex);
  auto it = g_details.find(static_cast<int>(error));
  return it != g_details.end() ? it->second.c_str() : plain_text(error);
}

cudaError_t cudaDeviceSynchronize() {
  std::lock_guard lock(g_mutex);
  std::string error;
  for (size_t i = 0; i < g_streams.size(); ++i) {  // tasks may add streams? no: only host calls do
    CUstream_st* s = g_streams[i].get();
    std::string e = run_to(s, s->queued);
    if (error.empty()) error = std::move(e);
  }
  return finish(error);
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  std::lock_guard lock(g_mutex);
  Arena& a = arena();
  *total = a.limit;
  *free = a.limit - a.in_use;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  std::lock_guard lock(g_mutex);
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
  std::lock_guard lock(g_mutex);
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
std::map<const char*, size_t>& pinned() {  // start -> bytes of each cudaMallocHost allocation (under g_mutex)
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
  std::lock_guard lock(g_mutex);
  *ptr = std::aligned_alloc(256, round_up(std::max<size_t>(bytes, 1), 256));
  if (*ptr == nullptr) return set_error(cudaErrorMemoryAllocation, "cudaMallocHost");
  pinned()[static_cast<const char*>(*ptr)] = std::max<size_t>(bytes, 1);
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  std::lock_guard lock(g_mutex);
  const cudaError_t pending = cudaDeviceSynchronize();  // a queued copy may still read it
  if (pinned().erase(static_cast<const char*>(ptr)) == 0) {
    return set_error(cudaErrorInvalidValue, "cudaFreeHost(" + pointer_text(ptr) + "): not a cudaMallocHost allocation");
  }
  std::free(ptr);
  return pending;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  std::lock_guard lock(g_mutex);  // the pinned map, which cudaMallocHost and cudaFreeHost change under it
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
  std::lock_guard lock(g_mutex);
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
  std::lock_guard lock(g_mutex);
  const cudaError_t status = cudaMemsetAsync(ptr, value, bytes, nullptr);
  return status != cudaSuccess ? status : cudaStreamSynchronize(nullptr);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  std::lock_guard lock(g_mutex);
  g_streams.push_back(std::make_unique<CUstream_st>());
  CUstream_st* s = g_streams.back().get();
  s->device = t_device;
  s->blocking = (flags & cudaStreamNonBlocking) == 0;
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  std::lock_guard lock(g_mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr || s->legacy) return set_error(cudaErrorInvalidResourceHandle, "cudaStreamDestroy");
  const std::string error = run_to(s, s->queued);  // its work completes, as on a GPU
  s->destroyed = true;
  return finish(error);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  std::lock_guard lock(g_mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return set_error(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize on a destroyed stream");
  return finish(run_to(s, s->queued));
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  // The emulated device runs a stream's work when it is asked about it.
  return cudaStreamSynchronize(stream);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  *event = new CUevent_st;
  (*event)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return set_error(cudaErrorInvalidResourceHandle, "cudaEventDestroy(null)");
  std::lock_guard lock(g_mutex);
  // A recorded event still queued keeps its record task pointing here: it
  // completes first.
  if (event->stream != nullptr && event->stream->done < event->position) run_to(event->stream, event->position);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  std::lock_guard lock(g_mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr || event == nullptr) return set_error(cudaErrorInvalidResourceHandle, "cudaEventRecord");
  const uint64_t generation = ++event->generation;
  event->stream = s;
  event->position = s->queued + 1;
  return enqueue(s, {"cudaEventRecord", [event, generation] {
                       if (event->generation == generation) {
                         event->at_ms = std::chrono::duration<double, std::milli>(Clock::now() - g_epoch).count();
                       }
                       return std::string();
                     }});
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  std::lock_guard lock(g_mutex);
  if (event == nullptr) return set_error(cudaErrorInvalidResourceHandle, "cudaEventSynchronize(null)");
  if (event->stream == nullptr) return cudaSuccess;  // never recorded: complete, as CUDA says
  return finish(run_to(event->stream, event->position));
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  std::lock_guard lock(g_mutex);
  if (event == nullptr) return set_error(cudaErrorInvalidResourceHandle, "cudaEventQuery(null)");
  if (event->stream == nullptr || event->stream->done >= event->position) return cudaSuccess;
  return cudaErrorNotReady;  // runs nothing; not an error kept for cudaGetLastError
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  std::lock_guard lock(g_mutex);
  if (start == nullptr || end == nullptr) return set_error(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime");
  if (!start->timing || !end->timing || start->stream == nullptr || end->stream == nullptr) {
    return set_error(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event without timing or never recorded");
  }
  if (start->stream->done < start->position || end->stream->done < end->position) {
    return set_error(cudaErrorNotReady, "cudaEventElapsedTime: an event has not completed");
  }
  *ms = static_cast<float>(end->at_ms - start->at_ms);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  std::lock_guard lock(g_mutex);
  (void)flags;
  if (event == nullptr) return set_error(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent(null event)");
  if (event->stream == nullptr) return cudaSuccess;  // never recorded: nothing to wait for
  CUstream_st* other = event->stream;
  const uint64_t position = event->position;
  return enqueue(stream, {"cudaStreamWaitEvent", [other, position] { return run_to(other, position); }});
}
