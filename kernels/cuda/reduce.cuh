// Block-level sums shared by reduce.cu and optim.cu, and the column sums
// shared by reduce.cu (sum_to over leading axes) and layer_norm.cu (dweight,
// dbias), each in a fixed order (the same tree every run, whatever the
// timing), so that a sum repeats bit for bit. For .cu files of kernels/cuda/
// only; every thread of the block must call the device functions (they hold
// barriers).
#pragma once

#include <array>
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

// Note [Column sums in chunks]: out_k[j] = sum over r of term(r, j)[k] for
// a (rows, n) matrix, K sums at once (layer norm's dweight and dbias), each
// in a fixed order:
// - a block per tile of `width` consecutive columns (32, or 16 or 8 when
//   wider tiles would give fewer than kColumnTilesWanted blocks; whole
//   32-byte sectors either way), as width columns x blockDim.x / width row
//   slices: slice s adds rows s, s + slices, ... of its column in order,
//   then slice 0 adds the slices' sums from shared memory in slice order;
// - when the tiles are too few to fill the GPU (a bias of 768 columns: 96
//   tiles), the rows are cut into `chunks` consecutive runs as well, a grid
//   row (blockIdx.y) each: chunk c writes its sums to partials (chunks, K,
//   n), and a second pass adds each column's chunks in chunk order. chunks
//   is the fewer of ceil(kColumnBlocksChunked / tiles) (blocks for a whole
//   H200) and rows / (slices * kColumnRowsPerThread) (enough rows a thread
//   to be worth a block), at least 1: at 8192 x 768, 11 chunks of 745 rows.
// The split (width, threads, chunks) is a function of (rows, n) alone, never
// of the device or of timing, so a sum's bits are the same on every GPU.
inline constexpr int64_t kColumnTilesWanted = 264;    // two blocks an SM of an H200 (132 SMs)
inline constexpr int64_t kColumnBlocksChunked = 1056;  // eight 256-thread blocks an SM: a full H200
inline constexpr int64_t kColumnRowsPerThread = 16;    // a chunk gives each thread at least this many rows
inline constexpr int64_t kColumnMaxTiles = 4096;

struct ColumnSplit {
  unsigned tiles;  // blocks along x (more tiles loop)
  unsigned threads;
  int width;
  int64_t chunks;      // blocks along y: 1 is one pass
  int64_t chunk_rows;  // rows a chunk (the last may have fewer)
};

inline ColumnSplit column_split(int64_t rows, int64_t n) {
  int width = 32;
  while (width > 8 && (n + width - 1) / width < kColumnTilesWanted) width /= 2;
  int threads = kThreads;
  while (threads > 32 && static_cast<int64_t>(threads / width / 2) >= rows) threads /= 2;
  const int64_t tiles = (n + width - 1) / width;
  const int64_t slices = threads / width;
  int64_t chunks = std::min((kColumnBlocksChunked + tiles - 1) / tiles, rows / (slices * kColumnRowsPerThread));
  chunks = std::max<int64_t>(chunks, 1);
  const int64_t chunk_rows = (rows + chunks - 1) / chunks;
  if (rows > 0) chunks = (rows + chunk_rows - 1) / chunk_rows;  // no empty chunk
  return {static_cast<unsigned>(std::min(tiles, kColumnMaxTiles)), static_cast<unsigned>(threads), width, chunks,
          chunk_rows};
}

// Where pass one writes sum k of column j for chunk c: at[k][c * chunk_step
// + j] (at[k] null: sum k is not wanted).
template <class T, int K>
struct ColumnOut {
  T* at[K];
  int64_t chunk_step;
};

// Pass one over the rows of chunk blockIdx.y; term(r, j, v) sets v[0..K) to
// element (r, j)'s terms. Tile loop bounds are the same for the whole
// block: every thread reaches every barrier.
template <class T, int K, class Term>
__global__ void column_sums_kernel(ColumnOut<T, K> out, int64_t rows, int64_t n, int64_t chunk_rows, int width,
                                   Term term) {
  __shared__ T share[K][kThreads];
  const int t = static_cast<int>(threadIdx.x);
  const int slices = static_cast<int>(blockDim.x) / width, slice = t / width;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * chunk_rows;
  const int64_t end = begin + chunk_rows < rows ? begin + chunk_rows : rows;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * width; first < n;
       first += static_cast<int64_t>(gridDim.x) * width) {
    const int64_t j = first + t % width;
    T acc[K] = {};
    if (j < n) {
      for (int64_t r = begin + slice; r < end; r += slices) {
        T v[K];
        term(r, j, v);
        for (int k = 0; k < K; ++k) acc[k] += v[k];
      }
    }
    for (int k = 0; k < K; ++k) share[k][t] = acc[k];
    __syncthreads();
    if (slice == 0 && j < n) {  // the slices in order
      for (int s = 1; s < slices; ++s) {
        for (int k = 0; k < K; ++k) acc[k] += share[k][t + s * width];
      }
      for (int k = 0; k < K; ++k) {
        if (out.at[k]) out.at[k][static_cast<int64_t>(blockIdx.y) * out.chunk_step + j] = acc[k];
      }
    }
    __syncthreads();  // the next tile writes share again
  }
}

// Pass two: out[k][j] = the sum of partials (chunks, K, n) over chunks, in
// chunk order, a thread a column.
template <class T, int K>
__global__ void column_chunks_sum(ColumnOut<T, K> out, const T* partials, int64_t chunks, int64_t n) {
  REMAT_GRID_STRIDE(j, n) {
    for (int k = 0; k < K; ++k) {
      if (!out.at[k]) continue;
      T acc = T(0);
      for (int64_t c = 0; c < chunks; ++c) acc += partials[(c * K + k) * n + j];
      out.at[k][j] = acc;
    }
  }
}

// out[k] (n) = the column sums of term over (rows, n), in one pass or two
// (Note [Column sums in chunks]), on `stream`; `names` are the two passes'
// launch names. The partials lie in the SumPartials scratch slot
// (launch.cuh), as a full sum's do. Nothing when n is 0; zeros when rows is
// 0.
template <class T, int K, class Term>
void column_sums(const std::array<const char*, 2>& names, std::array<T*, K> out, int64_t rows, int64_t n, Term term,
                 Stream stream) {
  if (n == 0) return;
  const ColumnSplit split = column_split(rows, n);
  const Grid first{dim3(split.tiles, static_cast<unsigned>(split.chunks)), dim3(split.threads)};
  ColumnOut<T, K> final_out{{}, 0};
  for (int k = 0; k < K; ++k) final_out.at[k] = out[k];
  if (split.chunks == 1) {
    launch(names[0], column_sums_kernel<T, K, Term>, first, stream, final_out, rows, n, split.chunk_rows, split.width,
           term);
    return;
  }
  const ScratchLease lease =
      scratch_on(stream, Scratch::SumPartials, static_cast<size_t>(split.chunks * K * n) * sizeof(T));
  T* partials = lease.as<T>();  // (chunks, K, n)
  ColumnOut<T, K> to_partials{{}, K * n};
  for (int k = 0; k < K; ++k) to_partials.at[k] = out[k] ? partials + k * n : nullptr;
  launch(names[0], column_sums_kernel<T, K, Term>, first, stream, to_partials, rows, n, split.chunk_rows, split.width,
         term);
  launch(names[1], column_chunks_sum<T, K>, {blocks_for(n), kThreads}, stream, final_out,
         static_cast<const T*>(partials), split.chunks, n);
}

}  // namespace remat::kernels::cuda
