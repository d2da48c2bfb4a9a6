// The CUDA runtime as the engine sees it: devices, memory, copies, streams,
// the versions a report names. Plain C++ (no CUDA headers), so that g++
// compiles every caller; implemented in runtime.cu. Errors throw
// std::runtime_error naming the call, the CUDA error and file:line
// (kernels/cuda/check.cuh); a machine without a GPU or driver has
// device_count() == 0 and nothing else is called.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace remat::kernels::cuda {

// The stream a CUDA kernel is queued on (a cudaStream_t; null is the
// device's legacy default stream). Passed last to every launcher, as
// kernels::cpu::Host is to a CPU kernel (Note [Kernels by device]).
struct Stream {
  void* handle = nullptr;
  int device = 0;
};

// GPUs this process can use; 0 where there is no driver or no GPU.
int device_count();
// "NVIDIA H200 (sm_90, 139.8 GiB)".
std::string device_name(int device);
// "driver 13.0, runtime 13.0, cuBLAS 13.0.0".
std::string versions();

// `bytes` on `device`, or null when the device is out of memory.
void* device_malloc(size_t bytes, int device);
void device_free(void* ptr, int device);

// Copies of `bytes`, queued on `stream`. Those to the host wait for it (the
// host reads the bytes next); the others return at once. A copy to the
// device has read `src` when it returns (the caller may reuse it) and, up to
// 64 MiB, does not wait for the stream: the bytes go through a pinned
// staging buffer held until the copy has run (Note [Host-to-device copies]
// in runtime.cu).
void copy_host_to_device(void* dst, const void* src, size_t bytes, Stream stream);
void copy_device_to_host(void* dst, const void* src, size_t bytes, Stream stream);
void copy_device_to_device(void* dst, const void* src, size_t bytes, Stream stream);
// Waits until everything queued on `stream` has run.
void synchronize(Stream stream);
// The stream every op of `device` runs on (one per device so far).
Stream compute_stream(int device);

// A timing marker queued on a stream (a cudaEvent_t): it completes once the
// work queued before it has run.
struct Event {
  void* handle = nullptr;
  int device = 0;
};
Event record_event(Stream stream);
// The GPU's milliseconds from `start` to `end`, waiting for `end` to complete.
double elapsed_ms(Event start, Event end);
void destroy_event(Event event) noexcept;

}  // namespace remat::kernels::cuda
