// The row machinery that softmax.cu and attention.cu share: a team of
// threads per row (a warp, or a block for long rows), its fixed-order sums
// and maxima (a __shfl_xor_sync butterfly, then the block's warps in warp
// order), and launch_rows, which gives each row to one team. One copy, so
// that causal_softmax's sums stay softmax's, bit for bit. For .cu files.
#pragma once

#include <math.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/launch.cuh"

namespace remat::kernels::cuda::rowwise {

inline constexpr unsigned kFullMask = 0xffffffffu;
inline constexpr int kWarp = 32;
inline constexpr int kWarpsPerBlock = kThreads / kWarp;  // a warp-per-row block's rows
inline constexpr int64_t kBlockRowFrom = 1024;           // n from which a block takes a row
inline constexpr int64_t kMaxBlocks = 4096;

__device__ inline float exp_of(float v) { return expf(v); }
__device__ inline double exp_of(double v) { return exp(v); }
__device__ inline float log_of(float v) { return logf(v); }
__device__ inline double log_of(double v) { return log(v); }

// The larger of a and b, +0 over -0: the same whichever is a (so both
// lanes of a butterfly pair agree). A NaN b is skipped and a NaN a kept:
// lanes may then disagree, but a NaN anywhere in a row makes all of its
// outputs NaN anyway (exp(NaN - m) is NaN, and so is the row's sum).
template <class T>
__device__ inline T max_of(T a, T b) {
  return b > a || (b == a && signbit(a)) ? b : a;
}

template <class T>
__device__ inline T lowest() {
  return static_cast<T>(-INFINITY);
}

// The sum over a warp's 32 lanes, in every lane (all 32 call it).
template <class T>
__device__ inline T warp_sum(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// The maximum over a warp's 32 lanes, in every lane (all 32 call it).
template <class T>
__device__ inline T warp_max(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = max_of(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// The threads that share a row: a warp, or a block of kThreads. rank() is
// the thread's place in the team (its first element), size() the stride.
struct WarpTeam {
  __device__ int64_t rank() const { return threadIdx.x % kWarp; }
  __host__ __device__ static inline constexpr int64_t size() { return kWarp; }
  template <class T>
  __device__ T sum(T v) const {
    return warp_sum(v);
  }
  template <class T>
  __device__ T max(T v) const {
    return warp_max(v);
  }
};

// share: kWarpsPerBlock + 1 elements of the block's shared memory. Two
// barriers a reduction: one before thread 0 reads the warps' results, one
// before every thread reads the total; the next reduction writes its warp
// results only after the second, and its total only after its own first, so
// no barrier is needed between reductions.
template <class T>
struct BlockTeam {
  T* share;
  __device__ int64_t rank() const { return threadIdx.x; }
  __host__ __device__ static inline constexpr int64_t size() { return kThreads; }
  template <class Op>
  __device__ T combine(T v, Op op) const {
    if (threadIdx.x % kWarp == 0) share[threadIdx.x / kWarp] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
      T total = share[0];
      for (int w = 1; w < kWarpsPerBlock; ++w) total = op(total, share[w]);
      share[kWarpsPerBlock] = total;
    }
    __syncthreads();
    return share[kWarpsPerBlock];
  }
  __device__ T sum(T v) const {
    return combine(warp_sum(v), [](T a, T b) { return a + b; });
  }
  __device__ T max(T v) const {
    return combine(warp_max(v), [](T a, T b) { return max_of(a, b); });
  }
};

// Warp w of block b takes rows b * kWarpsPerBlock + w, then a grid's worth on.
// The loop's bounds are the same for the 32 lanes of a warp: all of them
// reach every shuffle.
template <class Row>
__global__ void rows_by_warps(Row row, int64_t rows) {
  const WarpTeam team;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp; r < rows; r += step) {
    row(team, r);
  }
}

// Block b takes rows b, b + gridDim.x, ...: bounds the same for the block.
template <class Row>
__global__ void rows_by_blocks(Row row, int64_t rows) {
  using T = typename Row::Value;
  __shared__ T share[kWarpsPerBlock + 1];
  const BlockTeam<T> team{share};
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) row(team, r);
}

// `row` over rows rows of n elements: a warp a row, or a block for long rows.
template <class Row>
void launch_rows(const char* warp_name, const char* block_name, Row row, int64_t rows, int64_t n, Stream stream) {
  if (rows == 0) return;
  if (n >= kBlockRowFrom) {
    const auto blocks = static_cast<unsigned>(std::min(rows, kMaxBlocks));
    launch(block_name, rows_by_blocks<Row>, {blocks, kThreads}, stream, row, rows);
  } else {
    const auto blocks = static_cast<unsigned>(std::min((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks));
    launch(warp_name, rows_by_warps<Row>, {blocks, kThreads}, stream, row, rows);
  }
}

}  // namespace remat::kernels::cuda::rowwise
