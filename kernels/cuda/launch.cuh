// How the elementwise CUDA kernels of kernels/cuda/ are launched: a
// grid-stride loop over n elements, 256 threads a block, at most 4096
// blocks (a grid that covers an H200's 132 SMs many times over; larger
// tensors loop), on the caller's stream. For .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

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

}  // namespace remat::kernels::cuda
