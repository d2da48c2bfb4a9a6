// How kernels/cuda/ launches its kernels: launch() is the one place a kernel
// starts (no <<<>>> anywhere else), so that the same .cu files run on a GPU
// under nvcc and on the emulated GPU of a REMAT_CUDA_EMULATION build
// (kernels/cuda/emulation/, docs/gpu/emulation.md); dynamic_shared() is a
// block's dynamic shared memory on both. launch_elementwise: a grid-stride
// loop over n elements, 256 threads a block, at most 4096 blocks (a grid
// that covers an H200's 132 SMs many times over; larger tensors loop), on
// the caller's stream. For .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

inline constexpr int kThreads = 256;

inline cudaStream_t raw(Stream stream) { return static_cast<cudaStream_t>(stream.handle); }

inline unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 4096));
}

// for (i = this thread's first; i < n; i += the grid's threads) body(i)
#define REMAT_GRID_STRIDE(i, n)                                                                   \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);           \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// A launch's shape: blocks, threads a block, dynamic shared memory bytes.
struct Grid {
  dim3 blocks;
  dim3 threads;
  size_t shared_bytes = 0;
};

// kernel(args...) over `grid` on `stream`, with stream's device made current
// (every launch sets it: a caller's thread may have another current). The
// launch's own error (a shape the GPU refuses) throws at once, naming
// `name`; errors while it runs come with the next wait on the stream.
template <class... Params, class... Args>
void launch(const char* name, void (*kernel)(Params...), Grid grid, Stream stream, Args... args) {
  REMAT_CUDA_CHECK(cudaSetDevice(stream.device));
#if REMAT_CUDA_EMULATION
  (void)remat_emulation::launch({name, reinterpret_cast<const void*>(kernel), grid.blocks, grid.threads, grid.shared_bytes},
                                raw(stream), [kernel, args...] { kernel(args...); });
#else
  kernel<<<grid.blocks, grid.threads, grid.shared_bytes, raw(stream)>>>(args...);
#endif
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) {
    fail(name, std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")", __FILE__, __LINE__);
  }
}

// The running block's dynamic shared memory (Grid::shared_bytes of it), as T.
template <class T>
__device__ inline T* dynamic_shared() {
#if REMAT_CUDA_EMULATION
  return static_cast<T*>(remat_emulation::dynamic_shared());
#else
  extern __shared__ __align__(16) unsigned char remat_dynamic_shared[];
  return reinterpret_cast<T*>(remat_dynamic_shared);
#endif
}

// Runs body(i) for every i < n on `stream`; nothing for n == 0.
template <class Body>
__global__ void elementwise_kernel(int64_t n, Body body) {
  REMAT_GRID_STRIDE(i, n) body(i);
}

template <class Body>
void launch_elementwise(int64_t n, Stream stream, Body body) {
  if (n == 0) return;
  launch("elementwise_kernel", elementwise_kernel<Body>, {blocks_for(n), kThreads}, stream, n, body);
}

// A shape and K operands' element strides over it, by value for a kernel
// (at most kMaxRank axes). Element i of the shape, in row-major order, is at
// offset offsets_of(args, i)[k] of operand k. strided_args drops axes of
// size 1 and merges neighbouring axes that every operand walks as one
// (stride[d] == stride[d + 1] * shape[d + 1]), so that a contiguous tensor is
// one axis and a bias broadcast two: each axis left costs a 64-bit division
// per element.
inline constexpr int kMaxRank = 8;

template <int K>
struct StridedArgs {
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t strides[K][kMaxRank] = {};
};

template <int K>
StridedArgs<K> strided_args(const std::vector<int64_t>& shape, const std::array<const std::vector<int64_t>*, K>& strides) {
  std::vector<int64_t> sizes;
  std::array<std::vector<int64_t>, K> steps;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merges = !sizes.empty();
    for (int k = 0; k < K && merges; ++k) {
      merges = steps[static_cast<size_t>(k)].back() == (*strides[static_cast<size_t>(k)])[d] * shape[d];
    }
    if (merges) {
      sizes.back() *= shape[d];
      for (int k = 0; k < K; ++k) steps[static_cast<size_t>(k)].back() = (*strides[static_cast<size_t>(k)])[d];
    } else {
      sizes.push_back(shape[d]);
      for (int k = 0; k < K; ++k) steps[static_cast<size_t>(k)].push_back((*strides[static_cast<size_t>(k)])[d]);
    }
  }
  if (sizes.size() > static_cast<size_t>(kMaxRank)) {
    fail("strided kernel", std::to_string(sizes.size()) + " axes that cannot be merged, more than the " +
                               std::to_string(kMaxRank) + " the CUDA kernels take", __FILE__, __LINE__);
  }
  StridedArgs<K> args;
  args.rank = static_cast<int>(sizes.size());
  for (int d = 0; d < args.rank; ++d) {
    args.shape[d] = sizes[static_cast<size_t>(d)];
    for (int k = 0; k < K; ++k) args.strides[k][d] = steps[static_cast<size_t>(k)][static_cast<size_t>(d)];
  }
  return args;
}

template <int K>
struct Offsets {
  int64_t at[K];
};

template <int K>
__device__ inline Offsets<K> offsets_of(const StridedArgs<K>& args, int64_t i) {
  Offsets<K> out{};
  if (args.rank == 1) {  // contiguous, or one strided axis: no division
    for (int k = 0; k < K; ++k) out.at[k] = i * args.strides[k][0];
    return out;
  }
  for (int d = args.rank - 1; d >= 0; --d) {
    const int64_t index = i % args.shape[d];
    i /= args.shape[d];
    for (int k = 0; k < K; ++k) out.at[k] += index * args.strides[k][d];
  }
  return out;
}

// Device scratch: a launcher's temporaries without a cudaMalloc and a
// cudaFree per call (each a device-wide synchronisation). One buffer per
// (device, slot), kept for the process and grown as needed (runtime.cu),
// handed out as a lease:
//
//   const ScratchLease losses = scratch_on(stream, Scratch::CrossEntropyLosses, rows * sizeof(double));
//   launch(..., stream, losses.as<double>(), ...);   // queue (or run) the work that uses it
//   // the lease ends at scope exit
//
// - The buffer is the lease holder's alone: another host thread asking for
//   the same slot waits until the lease ends. Hold it until the work that
//   uses the buffer is queued.
// - Work queued on one stream runs in order, so the next holder's work on
//   the same stream runs after the last holder's. A holder on another
//   stream first waits for the last holder's stream.
// - A launcher that holds two leases takes them in the order of Scratch,
//   so that two launchers cannot each hold one the other waits for.
enum class Scratch {
  CrossEntropyLosses,
  CrossEntropyStatus,
  EmbeddingStarts,
  EmbeddingPositions,
  SquaredNormPartials,
  SumPartials,       // reduce.cu: the per-block partials of a full sum or of column sums in chunks
  MultiTensorTable,  // optim.cu: the tensors of a multi-tensor AdamW step or clip, and the clip's sums
  FlashAttentionRowDots,  // flash_attention.cu: backward's rowsum(dout * out), (B, Hq, Tq)
  kCount
};

class ScratchLease {
 public:
  ScratchLease(std::unique_lock<std::mutex> lock, void* ptr) : lock_(std::move(lock)), ptr_(ptr) {}
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  std::unique_lock<std::mutex> lock_;  // the slot's: held for the lease's life
  void* ptr_;
};

// At least `bytes` of `slot` on `stream`'s device, for work on `stream`.
ScratchLease scratch_on(Stream stream, Scratch slot, size_t bytes);

inline int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

}  // namespace remat::kernels::cuda
