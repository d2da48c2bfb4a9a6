// The CUDA runtime calls behind runtime.h.
//
// Note [Host-to-device copies]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A copy from pageable host memory (a std::vector, a batch the data loader
// just filled) must not drain the compute stream: cudaMemcpyAsync from
// pageable memory may wait for the stream to reach the copy, and waiting
// for the stream ourselves (as this file did, so that the caller could free
// its buffer on return) stalls the host until every queued kernel has run.
// Instead, copies of at most kStagedCopyMax bytes go through a pinned
// staging buffer:
//   1. the host copies the bytes into a pinned buffer nothing on the GPU
//      still reads (its event has completed: cudaEventQuery, no wait);
//   2. cudaMemcpyAsync from the pinned buffer is queued on the stream, a
//      true asynchronous copy, and an event recorded after it;
//   3. the buffer is not handed out again until that event completes, so
//      its bytes are read by the copy before they are overwritten.
// The caller's buffer is free on return (step 1 read it). Buffers are kept
// for the process, per device, at most kStagingBytes in all; past that the
// host waits for every queued copy and frees every buffer, of every device
// (the pool is full of copies not yet run), then starts again.
// Larger copies (a model's weights, once) copy and wait, as before.
#include "kernels/cuda/runtime.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/launch.cuh"

namespace remat::kernels::cuda {
namespace {

// Makes `device` current on this thread for the call that follows.
void use(int device) { REMAT_CUDA_CHECK(cudaSetDevice(device)); }

}  // namespace

int device_count() {
  int count = 0;
  // No driver, no GPU, or a driver older than the runtime: no devices, and
  // the error is cleared so that the next call does not report it.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

std::string device_name(int device) {
  cudaDeviceProp prop{};
  REMAT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  char text[320];
  std::snprintf(text, sizeof text, "%s (sm_%d%d, %.1f GiB)", prop.name, prop.major, prop.minor,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

std::string versions() {
  int driver = 0, runtime = 0;
  REMAT_CUDA_CHECK(cudaDriverGetVersion(&driver));
  REMAT_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  int major = 0, minor = 0, patch = 0;
  REMAT_CUBLAS_CHECK(cublasGetProperty(MAJOR_VERSION, &major));
  REMAT_CUBLAS_CHECK(cublasGetProperty(MINOR_VERSION, &minor));
  REMAT_CUBLAS_CHECK(cublasGetProperty(PATCH_LEVEL, &patch));
  char text[160];
  std::snprintf(text, sizeof text, "driver %d.%d, runtime %d.%d, cuBLAS %d.%d.%d", driver / 1000, driver % 1000 / 10,
                runtime / 1000, runtime % 1000 / 10, major, minor, patch);
  return text;
}

void* device_malloc(size_t bytes, int device) {
  use(device);
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // the pool gives its cache back and asks again
    return nullptr;
  }
  REMAT_CUDA_CHECK(status);
  return ptr;
}

void device_free(void* ptr, int device) {
  use(device);
  REMAT_CUDA_CHECK(cudaFree(ptr));
}

namespace {

constexpr size_t kStagedCopyMax = size_t{64} << 20;  // larger copies wait (Note [Host-to-device copies])
constexpr size_t kStagingBytes = size_t{256} << 20;  // pinned staging memory held at most
constexpr size_t kStagingMin = size_t{64} << 10;     // the smallest buffer made

struct StagingBuffer {
  void* host = nullptr;  // pinned
  size_t bytes = 0;
  int device = 0;
  cudaEvent_t read = nullptr;  // recorded after the last copy from `host`
  bool in_flight = false;      // `read` recorded and maybe not yet complete
};

struct Staging {
  std::mutex mutex;
  std::vector<StagingBuffer> buffers;
  size_t total = 0;
};

Staging& staging() {
  static auto& pool = *new Staging;  // kept for the process, as its buffers
  return pool;
}

// Whether the GPU has finished reading `b` (never waits).
bool idle(StagingBuffer& b) {
  if (!b.in_flight) return true;
  const cudaError_t status = cudaEventQuery(b.read);
  if (status == cudaErrorNotReady) {
    // Not an error: make sure a later launch's cudaGetLastError does not see it.
    if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
    return false;
  }
  REMAT_CUDA_CHECK(status);  // an error of earlier work
  b.in_flight = false;
  return true;
}

// A staging buffer of at least `bytes` on `device` that no copy still reads
// (the pool's lock held).
StagingBuffer& staging_buffer(Staging& pool, size_t bytes, int device) {
  StagingBuffer* best = nullptr;
  for (StagingBuffer& b : pool.buffers) {
    if (b.device == device && b.bytes >= bytes && (!best || b.bytes < best->bytes) && idle(b)) best = &b;
  }
  if (best) return *best;
  size_t size = kStagingMin;
  while (size < bytes) size *= 2;
  if (pool.total + size > kStagingBytes) {
    // Full of copies not yet run: wait for them all, then make room.
    for (StagingBuffer& b : pool.buffers) {
      if (b.in_flight) REMAT_CUDA_CHECK(cudaEventSynchronize(b.read));
      b.in_flight = false;
      if (b.device == device && b.bytes >= bytes && (!best || b.bytes < best->bytes)) best = &b;
    }
    if (best) return *best;
    // The pool forgets them before freeing, so a free that throws leaves no
    // freed buffer listed; the first error is thrown once all are freed.
    std::vector<StagingBuffer> old;
    old.swap(pool.buffers);
    pool.total = 0;
    cudaError_t first_error = cudaSuccess;
    for (StagingBuffer& b : old) {
      for (const cudaError_t error : {cudaSetDevice(b.device), cudaEventDestroy(b.read), cudaFreeHost(b.host)}) {
        if (first_error == cudaSuccess) first_error = error;
      }
    }
    REMAT_CUDA_CHECK(first_error);
    use(device);
  }
  StagingBuffer b{.bytes = size, .device = device};
  REMAT_CUDA_CHECK(cudaMallocHost(&b.host, size));
  if (const cudaError_t error = cudaEventCreateWithFlags(&b.read, cudaEventDisableTiming); error != cudaSuccess) {
    cudaFreeHost(b.host);
    REMAT_CUDA_CHECK(error);
  }
  pool.total += size;
  pool.buffers.push_back(b);
  return pool.buffers.back();
}

}  // namespace

void copy_host_to_device(void* dst, const void* src, size_t bytes, Stream stream) {
  use(stream.device);
  if (bytes > kStagedCopyMax) {
    REMAT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, raw(stream)));
    // The source is pageable host memory the caller may free on return.
    REMAT_CUDA_CHECK(cudaStreamSynchronize(raw(stream)));
    return;
  }
  // Note [Host-to-device copies]
  Staging& pool = staging();
  std::lock_guard lock(pool.mutex);
  StagingBuffer& b = staging_buffer(pool, bytes, stream.device);
  std::memcpy(b.host, src, bytes);
  REMAT_CUDA_CHECK(cudaMemcpyAsync(dst, b.host, bytes, cudaMemcpyHostToDevice, raw(stream)));
  // Until the event completes, the copy may still read b.host.
  if (const cudaError_t error = cudaEventRecord(b.read, raw(stream)); error != cudaSuccess) {
    (void)cudaStreamSynchronize(raw(stream));  // no event to wait on: the copy has read b.host after this
    REMAT_CUDA_CHECK(error);
  }
  b.in_flight = true;
}

void copy_device_to_host(void* dst, const void* src, size_t bytes, Stream stream) {
  use(stream.device);
  REMAT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, raw(stream)));
  REMAT_CUDA_CHECK(cudaStreamSynchronize(raw(stream)));
}

void copy_device_to_device(void* dst, const void* src, size_t bytes, Stream stream) {
  use(stream.device);
  REMAT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, raw(stream)));
}

void synchronize(Stream stream) {
  use(stream.device);
  REMAT_CUDA_CHECK(cudaStreamSynchronize(raw(stream)));
}

namespace {

// One scratch buffer: its lock is held by the lease (launch.cuh).
struct ScratchSlot {
  std::mutex mutex;
  void* ptr = nullptr;
  size_t bytes = 0;
  cudaStream_t last_stream = nullptr;  // of the last lease: its work may still be queued
};

ScratchSlot& scratch_slot(int device, Scratch slot) {
  using Slots = std::array<ScratchSlot, static_cast<size_t>(Scratch::kCount)>;
  static std::mutex mutex;
  // Never destroyed, as the buffers: kept for the process, and slots handed
  // out stay where they are as devices are added.
  static auto& devices = *new std::vector<std::unique_ptr<Slots>>;
  std::lock_guard lock(mutex);
  if (devices.size() <= static_cast<size_t>(device)) devices.resize(static_cast<size_t>(device) + 1);
  std::unique_ptr<Slots>& slots = devices[static_cast<size_t>(device)];
  if (!slots) slots = std::make_unique<Slots>();
  return (*slots)[static_cast<size_t>(slot)];
}

}  // namespace

ScratchLease scratch_on(Stream stream, Scratch slot, size_t bytes) {
  ScratchSlot& s = scratch_slot(stream.device, slot);
  std::unique_lock lock(s.mutex);
  if (s.ptr && s.last_stream != raw(stream)) synchronize({s.last_stream, stream.device});
  if (s.bytes < bytes) {
    // Forgotten before the free: a cudaFree that throws (it also reports
    // errors of earlier work) must not leave a pointer to be freed again.
    void* old = std::exchange(s.ptr, nullptr);
    s.bytes = 0;
    if (old) device_free(old, stream.device);  // cudaFree waits for the work that read it
    s.ptr = device_malloc(std::max<size_t>(bytes, 1), stream.device);
    if (!s.ptr) fail("scratch_on", "out of memory for " + std::to_string(bytes) + " bytes of scratch", __FILE__, __LINE__);
    s.bytes = bytes;
  }
  s.last_stream = raw(stream);
  return {std::move(lock), s.ptr};
}

Stream compute_stream(int device) {
  // One non-blocking stream per device, made on first use and kept for the
  // process: collectives get their own (comm/), ordered by events.
  static std::mutex mutex;
  static std::vector<cudaStream_t> streams;
  std::lock_guard lock(mutex);
  if (streams.empty()) streams.assign(static_cast<size_t>(device_count()), nullptr);
  if (device < 0 || static_cast<size_t>(device) >= streams.size()) {
    fail("compute_stream", "no device " + std::to_string(device) + " (this process sees " +
                               std::to_string(streams.size()) + ")", __FILE__, __LINE__);
  }
  cudaStream_t& stream = streams[static_cast<size_t>(device)];
  if (!stream) {
    use(device);
    REMAT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  return {stream, device};
}

Event record_event(Stream stream) {
  use(stream.device);
  cudaEvent_t event = nullptr;
  REMAT_CUDA_CHECK(cudaEventCreate(&event));
  if (const cudaError_t error = cudaEventRecord(event, raw(stream)); error != cudaSuccess) {
    cudaEventDestroy(event);
    REMAT_CUDA_CHECK(error);
  }
  return {event, stream.device};
}

double elapsed_ms(Event start, Event end) {
  use(end.device);
  REMAT_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(end.handle)));
  float ms = 0;
  REMAT_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.handle), static_cast<cudaEvent_t>(end.handle)));
  return ms;
}

void destroy_event(Event event) noexcept {
  if (!event.handle) return;
  cudaSetDevice(event.device);
  cudaEventDestroy(static_cast<cudaEvent_t>(event.handle));
}

}  // namespace remat::kernels::cuda
