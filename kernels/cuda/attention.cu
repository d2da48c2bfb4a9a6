// The causal softmax of attention on the GPU; see attention.h.
//
// How the work is split, over rows of n = T scores (row r is row i = r % T
// of its (T, T) matrix and sees columns 0..i, its prefix), as softmax.cu
// splits softmax's rows:
// - T < 1024: a WARP PER ROW. 256-thread blocks hold 8 warps, 8 rows a
//   block; the grid (at most 4096 blocks) walks the rows with a grid-stride
//   loop. Lane l takes prefix elements l, l + 32, ... in that order, and the
//   32 lanes combine their maxima and sums with a __shfl_xor_sync butterfly
//   (offsets 16, 8, 4, 2, 1).
// - T >= 1024 (GPT-2's context): a BLOCK PER ROW, 256 threads: thread t
//   takes prefix elements t, t + 256, ... in order, each warp combines its
//   lanes with the butterfly, the 8 warp results go to shared memory, and
//   thread 0 adds them in warp order.
// Only the prefix is read (about half of a matrix); the columns after it
// are written 0. Forward reads its prefix in three passes (max, sum of
// exp(x - max), output), backward in two (the dot product dy . y, then
// dx); a row's prefix is at most 4 KB at T = 1024 in float32, so the
// passes after the first read it from L1. Each thread writes only elements
// it read itself, or elements nobody reads: out may be x, dx may be dy.
//
// Why sums repeat bit for bit: which thread adds which elements, in which
// order, and the shape of every combining tree depend only on (T, the
// path), never on timing or on the number of blocks (a row belongs to one
// warp or one block, whichever that is); there are no atomics. The xor
// butterfly leaves every lane with the same bits (both lanes of a pair
// combine the same two numbers; IEEE addition is commutative, and so is
// max_of). And the results are softmax.cu's on masked_fill(x, -inf), bit
// for bit: there, a masked column added exp(-inf - m) = 0 to its thread's
// running sum (and dy * 0 in backward), which changes no sum, in the same
// threads in the same order; here that thread skips it.
#include "kernels/cuda/attention.h"

#include <math.h>

#include <algorithm>

#include "kernels/cuda/launch.cuh"

namespace remat::kernels::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = kThreads / kWarp;  // a warp-per-row block's rows
constexpr int64_t kBlockRowFrom = 1024;           // T from which a block takes a row
constexpr int64_t kMaxBlocks = 4096;

__device__ inline float exp_of(float v) { return expf(v); }
__device__ inline double exp_of(double v) { return exp(v); }

// The larger of a and b, +0 over -0, the same whichever is a (softmax.cu's).
template <class T>
__device__ inline T max_of(T a, T b) {
  return b > a || (b == a && signbit(a)) ? b : a;
}

template <class T>
__device__ inline T warp_sum(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

template <class T>
__device__ inline T warp_max(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = max_of(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// The threads that share a row: a warp, or a block. rank(): the thread's
// first element; size(): the stride between its elements.
struct WarpTeam {
  __device__ int64_t rank() const { return threadIdx.x % kWarp; }
  __host__ __device__ static constexpr int64_t size() { return kWarp; }
  template <class T>
  __device__ T sum(T v) const {
    return warp_sum(v);
  }
  template <class T>
  __device__ T max(T v) const {
    return warp_max(v);
  }
};

// share: kWarpsPerBlock + 1 elements of shared memory. Two barriers a
// reduction (before thread 0 reads the warps' results, before every thread
// reads the total); the next reduction writes the warps' slots only after
// the second, so none is needed between reductions (softmax.cu's BlockTeam).
template <class T>
struct BlockTeam {
  T* share;
  __device__ int64_t rank() const { return threadIdx.x; }
  __host__ __device__ static constexpr int64_t size() { return kThreads; }
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

template <class T>
struct CausalSoftmaxForwardRow {
  using Value = T;
  T* out;      // (rows, n)
  const T* x;  // (rows, n)
  int64_t n;
  template <class Team>
  __device__ void operator()(const Team& team, int64_t r) const {
    const int64_t p = r % n + 1;  // the prefix: columns 0..i
    const T* xr = x + r * n;
    T* orow = out + r * n;
    T m = static_cast<T>(-INFINITY);
    for (int64_t j = team.rank(); j < p; j += team.size()) m = max_of(m, xr[j]);
    m = team.max(m);
    T total = 0;
    for (int64_t j = team.rank(); j < p; j += team.size()) total += exp_of(xr[j] - m);
    const T inv = T(1) / team.sum(total);
    for (int64_t j = team.rank(); j < p; j += team.size()) orow[j] = exp_of(xr[j] - m) * inv;
    for (int64_t j = p + team.rank(); j < n; j += team.size()) orow[j] = T(0);
  }
};

// y = softmax(x) on the prefix: dx_j = y_j (dy_j - sum_{k <= i} dy_k y_k), 0 after it.
template <class T>
struct CausalSoftmaxBackwardRow {
  using Value = T;
  T* dx;          // (rows, n)
  const T* dout;  // (rows, n)
  const T* out;   // (rows, n)
  int64_t n;
  template <class Team>
  __device__ void operator()(const Team& team, int64_t r) const {
    const int64_t p = r % n + 1;
    const T* g = dout + r * n;
    const T* y = out + r * n;
    T* d = dx + r * n;
    T dot = 0;
    for (int64_t j = team.rank(); j < p; j += team.size()) dot += g[j] * y[j];
    dot = team.sum(dot);
    for (int64_t j = team.rank(); j < p; j += team.size()) d[j] = y[j] * (g[j] - dot);
    for (int64_t j = p + team.rank(); j < n; j += team.size()) d[j] = T(0);
  }
};

// Warp w of block b takes rows b * kWarpsPerBlock + w, then a grid's worth
// on; the loop's bounds are the same for the 32 lanes of a warp, so all of
// them reach every shuffle.
template <class Row>
__global__ void causal_rows_by_warps(Row row, int64_t rows) {
  const WarpTeam team;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp; r < rows; r += step) {
    row(team, r);
  }
}

// Block b takes rows b, b + gridDim.x, ...: bounds the same for the block.
template <class Row>
__global__ void causal_rows_by_blocks(Row row, int64_t rows) {
  using T = typename Row::Value;
  __shared__ T share[kWarpsPerBlock + 1];
  const BlockTeam<T> team{share};
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) row(team, r);
}

template <class Row>
void launch_causal_rows(const char* warp_name, const char* block_name, Row row, int64_t rows, int64_t n,
                        Stream stream) {
  if (rows == 0) return;
  if (n >= kBlockRowFrom) {
    const auto blocks = static_cast<unsigned>(std::min(rows, kMaxBlocks));
    launch(block_name, causal_rows_by_blocks<Row>, {blocks, kThreads}, stream, row, rows);
  } else {
    const auto blocks = static_cast<unsigned>(std::min((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks));
    launch(warp_name, causal_rows_by_warps<Row>, {blocks, kThreads}, stream, row, rows);
  }
}

}  // namespace

template <class T> void causal_softmax_forward(T* out, const T* x, int64_t rows, int64_t n, Stream stream) {
  launch_causal_rows("causal_softmax_forward_warp_rows", "causal_softmax_forward_block_rows",
                     CausalSoftmaxForwardRow<T>{out, x, n}, rows, n, stream);
}

template <class T>
void causal_softmax_backward(T* dx, const T* dout, const T* out, int64_t rows, int64_t n, Stream stream) {
  launch_causal_rows("causal_softmax_backward_warp_rows", "causal_softmax_backward_block_rows",
                     CausalSoftmaxBackwardRow<T>{dx, dout, out, n}, rows, n, stream);
}

#define REMAT_INSTANTIATE_CAUSAL_SOFTMAX(T)                                          \
  template void causal_softmax_forward<T>(T*, const T*, int64_t, int64_t, Stream); \
  template void causal_softmax_backward<T>(T*, const T*, const T*, int64_t, int64_t, Stream);
REMAT_INSTANTIATE_CAUSAL_SOFTMAX(float)
REMAT_INSTANTIATE_CAUSAL_SOFTMAX(double)
#undef REMAT_INSTANTIATE_CAUSAL_SOFTMAX

}  // namespace remat::kernels::cuda
