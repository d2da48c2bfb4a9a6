// The CUDA runtime calls behind runtime.h.
#include "kernels/cuda/runtime.h"

#include <cstdio>
#include <mutex>
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

void copy_host_to_device(void* dst, const void* src, size_t bytes, Stream stream) {
  use(stream.device);
  REMAT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, raw(stream)));
  // The source is pageable host memory the caller may free on return.
  REMAT_CUDA_CHECK(cudaStreamSynchronize(raw(stream)));
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

void* scratch_on(int device, Scratch slot, size_t bytes) {
  struct Buffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  static std::mutex mutex;
  static std::vector<std::vector<Buffer>> buffers;  // [device][slot]
  std::lock_guard lock(mutex);
  if (buffers.size() <= static_cast<size_t>(device)) buffers.resize(static_cast<size_t>(device) + 1);
  std::vector<Buffer>& slots = buffers[static_cast<size_t>(device)];
  slots.resize(static_cast<size_t>(Scratch::kCount));
  Buffer& b = slots[static_cast<size_t>(slot)];
  if (b.bytes < bytes) {
    if (b.ptr) device_free(b.ptr, device);  // cudaFree waits for the work that read it
    b = {};
    b.ptr = device_malloc(std::max<size_t>(bytes, 1), device);
    if (!b.ptr) fail("scratch_on", "out of memory for " + std::to_string(bytes) + " bytes of scratch", __FILE__, __LINE__);
    b.bytes = bytes;
  }
  return b.ptr;
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
