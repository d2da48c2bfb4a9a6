// Block-level sums shared by reduce.cu and optim.cu, each in a fixed order
// (the same tree every run, whatever the timing), so that a sum repeats bit
// for bit. For .cu files of kernels/cuda/ only; every thread of the block
// must call them (they hold barriers).
#pragma once

#include <cstdint>

#include "kernels/cuda/launch.cuh"

namespace remat::kernels::cuda {

// The blocks of a squared norm (reduce.cu's squared_norm, optim.cu's
// clip_grads): each takes a strided share of the tensor.
inline constexpr int kNormBlocks = 256;

// Block `block` of kNormBlocks (kThreads threads each): the sum in double of
// x[i]^2 over i = block * kThreads + t + k * kNormBlocks * kThreads, thread t
// in order of k, then the threads' sums in a halving tree in shared memory.
// Returns the block's sum on thread 0 (others: a part of it).
template <class T>
__device__ inline double block_squared_norm(const T* x, int64_t n, int block) {
  __shared__ double share[kThreads];
  double acc = 0;
  for (int64_t i = static_cast<int64_t>(block) * kThreads + threadIdx.x; i < n;
       i += static_cast<int64_t>(kNormBlocks) * kThreads) {
    acc += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  }
  share[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) share[threadIdx.x] += share[threadIdx.x + half];
    __syncthreads();
  }
  const double sum = share[0];
  __syncthreads();  // share is written again by the block's next call
  return sum;
}

// The sum of every thread's `value` (blockDim.x a multiple of 32, at most
// kThreads): a __shfl_down_sync tree in each warp, then thread 0 adds the
// warps' sums in warp order. The result is thread 0's.
template <class T>
__device__ inline T block_sum(T value) {
  __shared__ T warp_sums[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = value;
  __syncthreads();
  T sum = T(0);
  if (threadIdx.x == 0) {
    for (int w = 0; w < static_cast<int>(blockDim.x) / 32; ++w) sum += warp_sums[w];
  }
  __syncthreads();  // warp_sums is written again by the block's next call
  return sum;
}

}  // namespace remat::kernels::cuda
