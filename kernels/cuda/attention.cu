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
#include "kernels/cuda/rows.cuh"

namespace remat::kernels::cuda {
namespace {

using namespace rowwise;  // rows.cuh: teams, their sums, launch_rows

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

}  // namespace

template <class T> void causal_softmax_forward(T* out, const T* x, int64_t rows, int64_t n, Stream stream) {
  launch_rows("causal_softmax_forward_warp_rows", "causal_softmax_forward_block_rows",
                     CausalSoftmaxForwardRow<T>{out, x, n}, rows, n, stream);
}

template <class T>
void causal_softmax_backward(T* dx, const T* dout, const T* out, int64_t rows, int64_t n, Stream stream) {
  launch_rows("causal_softmax_backward_warp_rows", "causal_softmax_backward_block_rows",
                     CausalSoftmaxBackwardRow<T>{dx, dout, out, n}, rows, n, stream);
}

#define REMAT_INSTANTIATE_CAUSAL_SOFTMAX(T)                                          \
  template void causal_softmax_forward<T>(T*, const T*, int64_t, int64_t, Stream); \
  template void causal_softmax_backward<T>(T*, const T*, const T*, int64_t, int64_t, Stream);
REMAT_INSTANTIATE_CAUSAL_SOFTMAX(float)
REMAT_INSTANTIATE_CAUSAL_SOFTMAX(double)
#undef REMAT_INSTANTIATE_CAUSAL_SOFTMAX

}  // namespace remat::kernels::cuda
