// The CUDA runtime as remat's emulated GPU offers it (REMAT_CUDA_EMULATION):
// the part of cuda_runtime.h that remat's .cu files and comm/ use, for a
// host C++ compiler. Kernels are plain functions; each block's threads run
// as fibers on the host (kernels/cuda/emulation/threads.cpp), device memory
// is an arena the host cannot touch between device work (device.cpp), and
// streams run their queued work in order when the host waits for it. What
// this cannot show is listed in docs/gpu/emulation.md.
#pragma once

#include <math.h>  // the device math functions (expf, tanh, isnan, ...), as nvcc has them

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

// Function and variable qualifiers: every function is a host function here.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// A block's threads share one host thread (fibers), so a static per host
// thread is one per block while the block runs. Dynamic shared memory is
// kernels/cuda/launch.cuh's dynamic_shared(), fresh for every block.
#define __shared__ static thread_local

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchTimeout = 702,
  cudaErrorLaunchFailure = 719,
  cudaErrorNoDevice = 100,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

inline constexpr unsigned cudaStreamDefault = 0;
inline constexpr unsigned cudaStreamNonBlocking = 1;
inline constexpr unsigned cudaEventDefault = 0;
inline constexpr unsigned cudaEventDisableTiming = 2;

struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  size_t sharedMemPerBlockOptin;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int major;
  int minor;
  int multiProcessorCount;
  int l2CacheSize;
  int maxThreadsPerMultiProcessor;
};

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);

cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocHost(void** ptr, size_t bytes);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

// Raises a kernel's dynamic shared memory limit (the one attribute taken).
cudaError_t remat_emulation_set_shared_limit(const void* kernel, int bytes);
template <class... P>
cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attribute, int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
  return remat_emulation_set_shared_limit(reinterpret_cast<const void*>(kernel), value);
}

// The inside of the emulated device that device code reaches: the running
// thread's indices, barriers and warp collectives (threads.cpp).
namespace remat_emulation {

struct ThreadPlace {
  uint3 thread;
  uint3 block;
  dim3 block_dim;
  dim3 grid_dim;
};
extern thread_local constinit const ThreadPlace* t_place;  // constinit: read without a TLS wrapper call

void sync_threads();
enum class WarpOp { Sync, Shfl, ShflUp, ShflDown, ShflXor, Ballot, Any, All };
uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width);

template <class T>
uint64_t bits_of(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "a warp shuffle moves at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <class T>
T from_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

}  // namespace remat_emulation

#define threadIdx (::remat_emulation::t_place->thread)
#define blockIdx (::remat_emulation::t_place->block)
#define blockDim (::remat_emulation::t_place->block_dim)
#define gridDim (::remat_emulation::t_place->grid_dim)
inline constexpr int warpSize = 32;

inline void __syncthreads() { ::remat_emulation::sync_threads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::remat_emulation::warp_collective(::remat_emulation::WarpOp::Sync, mask, 0, 0, 32);
}
template <class T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
  using namespace ::remat_emulation;
  return from_bits<T>(warp_collective(WarpOp::Shfl, mask, bits_of(v), src_lane, width));
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  using namespace ::remat_emulation;
  return from_bits<T>(warp_collective(WarpOp::ShflUp, mask, bits_of(v), static_cast<int>(delta), width));
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  using namespace ::remat_emulation;
  return from_bits<T>(warp_collective(WarpOp::ShflDown, mask, bits_of(v), static_cast<int>(delta), width));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  using namespace ::remat_emulation;
  return from_bits<T>(warp_collective(WarpOp::ShflXor, mask, bits_of(v), lane_mask, width));
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  using namespace ::remat_emulation;
  return static_cast<unsigned>(warp_collective(WarpOp::Ballot, mask, predicate != 0, 0, 32));
}
inline int __any_sync(unsigned mask, int predicate) {
  using namespace ::remat_emulation;
  return static_cast<int>(warp_collective(WarpOp::Any, mask, predicate != 0, 0, 32));
}
inline int __all_sync(unsigned mask, int predicate) {
  using namespace ::remat_emulation;
  return static_cast<int>(warp_collective(WarpOp::All, mask, predicate != 0, 0, 32));
}

// Device math that nvcc has beyond <cmath>.
inline float rsqrtf(float v) { return 1.0f / sqrtf(v); }
inline double rsqrt(double v) { return 1.0 / sqrt(v); }
inline float __expf(float v) { return expf(v); }
inline float __logf(float v) { return logf(v); }
inline float __fdividef(float a, float b) { return a / b; }
template <class T>
T __ldg(const T* p) {
  return *p;
}

// A kernel launch as kernels/cuda/launch.cuh makes it: `body` runs once per
// thread of the grid when `stream` reaches it. Returns the launch's own error
// (a configuration no GPU takes) at once, as cudaGetLastError would.
#include <memory>
namespace remat_emulation {

struct LaunchSpec {
  const char* name;
  const void* function;  // the kernel, for its shared memory limit
  dim3 grid;
  dim3 block;
  size_t shared_bytes;
};
using Invoke = void (*)(const void* closure);
cudaError_t launch_erased(const LaunchSpec& spec, cudaStream_t stream, Invoke invoke,
                          std::shared_ptr<const void> closure);

template <class F>
cudaError_t launch(const LaunchSpec& spec, cudaStream_t stream, F body) {
  auto closure = std::make_shared<const F>(std::move(body));
  return launch_erased(
      spec, stream, [](const void* c) { (*static_cast<const F*>(c))(); }, std::move(closure));
}

// The running block's dynamic shared memory (spec.shared_bytes of it).
void* dynamic_shared();

}  // namespace remat_emulation

inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
