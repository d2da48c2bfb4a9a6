// The emulated GPU's runtime behind cuda_runtime.h: here its devices and
// errors, and the Note on how its memory (memory.cpp) and its streams and
// events (streams.cpp) behave; see Note [Device memory and streams].
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
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kernels/cuda/emulation/control.h"
#include "kernels/cuda/emulation/emulator.h"
#include "kernels/cuda/emulation/runtime.h"

namespace remat_emulation {
namespace {

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

}  // namespace

// --- settings ---------------------------------------------------------------

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

// --- shared with the emulator's other parts ---------------------------------

cudaError_t set_error(cudaError_t error, const std::string& detail) {
  t_last_error = error;
  std::lock_guard lock(g_detail_mutex);
  g_details[static_cast<int>(error)] = std::string(plain_text(error)) + ": " + detail;
  return error;
}

int current_device() { return t_device; }

}  // namespace remat_emulation

// --- cuda_runtime.h: devices and errors -------------------------------------

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
  prop->totalGlobalMem = memory_use().limit;
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
