// How the elementwise CUDA kernels of kernels/cuda/ are launched: a
// grid-stride loop over n elements, 256 threads a block, at most 4096
// blocks (a grid that covers an H200's 132 SMs many times over; larger
// tensors loop), on the caller's stream. For .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
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

// Runs body(i) for every i < n on `stream`; nothing for n == 0.
template <class Body>
__global__ void elementwise_kernel(int64_t n, Body body) {
  REMAT_GRID_STRIDE(i, n) body(i);
}

template <class Body>
void launch_elementwise(int64_t n, Stream stream, Body body) {
  if (n == 0) return;
  REMAT_CUDA_CHECK(cudaSetDevice(stream.device));
  elementwise_kernel<<<blocks_for(n), kThreads, 0, raw(stream)>>>(n, body);
  REMAT_CUDA_LAUNCHED();
}

// A shape and K operands' element strides over it, by value for a kernel
// (at most kMaxRank axes). Element i of the shape, in row-major order, is at
// offset offsets_of(args, i)[k] of operand k.
inline constexpr int kMaxRank = 8;

template <int K>
struct StridedArgs {
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t strides[K][kMaxRank] = {};
};

template <int K>
StridedArgs<K> strided_args(const std::vector<int64_t>& shape, const std::array<const std::vector<int64_t>*, K>& strides) {
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    fail("strided kernel", std::to_string(shape.size()) + " axes, more than the " + std::to_string(kMaxRank) +
                               " the CUDA kernels take", __FILE__, __LINE__);
  }
  StridedArgs<K> args;
  args.rank = static_cast<int>(shape.size());
  for (int d = 0; d < args.rank; ++d) {
    args.shape[d] = shape[static_cast<size_t>(d)];
    for (int k = 0; k < K; ++k) args.strides[k][d] = (*strides[static_cast<size_t>(k)])[static_cast<size_t>(d)];
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
  for (int d = args.rank - 1; d >= 0; --d) {
    const int64_t index = i % args.shape[d];
    i /= args.shape[d];
    for (int k = 0; k < K; ++k) out.at[k] += index * args.strides[k][d];
  }
  return out;
}

// Device scratch of at least `bytes` on `device` in `slot`, kept for the
// process and grown as needed (runtime.cu): a launcher's temporaries without
// a cudaMalloc and a cudaFree per call, each a device-wide synchronisation.
// Work queued on one stream reads it in order, so the next call may reuse it.
enum class Scratch {
  CrossEntropyLosses,
  CrossEntropyStatus,
  EmbeddingStarts,
  EmbeddingPositions,
  SquaredNormPartials,
  kCount
};
void* scratch_on(int device, Scratch slot, size_t bytes);

inline int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

}  // namespace remat::kernels::cuda
