// Layer norm on the GPU; see layer_norm.h.
//
// How the work is split:
// - The forward (statistics and output) and backward's dx: a WARP PER ROW.
//   256-thread blocks hold 8 warps, so 8 rows a block; the grid (at most 4096
//   blocks) walks the rows with a grid-stride loop. Lane l takes channels
//   l, l + 32, ... of its row, in that order, and the lanes combine their sums
//   with a __shfl_xor_sync butterfly (offsets 16, 8, 4, 2, 1). The statistics
//   are the CPU's corrected two-pass (layer_norm.h): a first mean, then the
//   sums of d = x - mean and d^2, combined in double. (In float, the two
//   sums of a pass share their butterfly's shuffles: warp_sum_pair.)
// - layer_norm_apply: rows by blockIdx.y (then gridDim.y on), channels by
//   the block's threads along x, so that a thread reads its row's mean and
//   rstd once a row and indexes by (row, channel) with no division.
// - dweight and dbias, sums over rows per channel: reduce.cuh's column_sums
//   (Note [Column sums in chunks]), both sums at once: a block per tile of
//   W consecutive channels (W = 32, or 16 or 8 when there are few), as W
//   columns x 256 / W row slices added in slice order; when the tiles are
//   too few to fill the GPU (96 at 768 channels), the rows are cut into
//   fixed chunks too (a function of (rows, channels) alone), and a second
//   pass adds each channel's chunk sums in chunk order.
//
// Why sums repeat bit for bit: which thread adds which elements, in which
// order, and the shape of every combining tree depend only on the shape
// (rows, channels), never on timing or on which block runs a row or a tile;
// there are no atomics. The xor butterfly leaves every lane with the same
// bits (both lanes of a pair add the same two numbers; IEEE addition is
// commutative).
#include "kernels/cuda/layer_norm.h"

#include <stdint.h>
#include <string.h>

#include <algorithm>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce.cuh"

namespace remat::kernels::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = kThreads / kWarp;  // rows a block of the warp-per-row kernels
constexpr int64_t kMaxBlocks = 4096;

// The sum over a warp's 32 lanes, in every lane (all 32 call it).
template <class T>
__device__ inline T warp_sum(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// The sums over a warp's 32 lanes of a and of b, in every lane: two
// butterflies, the same additions as two warp_sum calls. For float the pair
// travels as one 64-bit shuffle: on a GPU the same two 32-bit shuffles, on
// the emulated GPU (where each collective switches all 32 threads) half as
// many collectives.
template <class T>
__device__ inline void warp_sum_pair(T& a, T& b) {
  if constexpr (sizeof(T) == 4) {
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      uint32_t a_bits, b_bits;
      memcpy(&a_bits, &a, 4);
      memcpy(&b_bits, &b, 4);
      const unsigned long long pair = __shfl_xor_sync(kFullMask, static_cast<unsigned long long>(b_bits) << 32 | a_bits,
                                                      offset);
      a_bits = static_cast<uint32_t>(pair);
      b_bits = static_cast<uint32_t>(pair >> 32);
      T other_a, other_b;
      memcpy(&other_a, &a_bits, 4);
      memcpy(&other_b, &b_bits, 4);
      a += other_a;
      b += other_b;
    }
  } else {
    a = warp_sum(a);
    b = warp_sum(b);
  }
}

template <class T>
__device__ inline T normalised(T x, T m, T r, const T* weight, const T* bias, int64_t j) {
  T y = (x - m) * r;
  if (weight) y = y * weight[j];
  if (bias) y = y + bias[j];
  return y;
}

// out (rows, channels) = normalised(x): see layer_norm_apply's note at the top.
template <class T>
__global__ void apply_rows(T* out, const T* mean, const T* rstd, const T* x, const T* weight, const T* bias,
                           int64_t rows, int64_t channels) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const T m = mean[r], rs = rstd[r];
    const T* x_row = x + r * channels;  // (channels)
    T* out_row = out + r * channels;    // (channels)
    for (int64_t j = first; j < channels; j += step) out_row[j] = normalised(x_row[j], m, rs, weight, bias, j);
  }
}

// Warp w of block b takes rows b * kWarpsPerBlock + w, then a grid's worth
// on: the loop's bounds are the same for the 32 lanes of a warp, so all of
// them reach every shuffle.
#define REMAT_WARP_ROWS(r, rows)                                                                                   \
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp; r < (rows);          \
       r += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock)

template <class T>
__global__ void forward_rows(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, int64_t rows,
                             int64_t channels, double eps) {
  const int64_t lane = threadIdx.x % kWarp;
  const T inv_c = T(1) / static_cast<T>(channels);
  REMAT_WARP_ROWS(r, rows) {
    const T* xr = x + r * channels;
    T total = 0;
    for (int64_t j = lane; j < channels; j += kWarp) total += xr[j];
    const T m0 = warp_sum(total) * inv_c;
    T sum_d = 0, sum_d2 = 0;
    for (int64_t j = lane; j < channels; j += kWarp) {
      const T d = xr[j] - m0;
      sum_d += d;
      sum_d2 += d * d;
    }
    warp_sum_pair(sum_d, sum_d2);
    const double shift = static_cast<double>(sum_d) * static_cast<double>(inv_c);
    const double var = fmax(0.0, static_cast<double>(sum_d2) * static_cast<double>(inv_c) - shift * shift);
    const T m = static_cast<T>(static_cast<double>(m0) + shift), rs = static_cast<T>(1.0 / sqrt(var + eps));
    if (lane == 0) {
      mean[r] = m;
      rstd[r] = rs;
    }
    for (int64_t j = lane; j < channels; j += kWarp) out[r * channels + j] = normalised(xr[j], m, rs, weight, bias, j);
  }
}

template <class T>
__global__ void backward_dx_rows(T* dx, const T* dout, const T* x, const T* weight, const T* mean, const T* rstd,
                                 int64_t rows, int64_t channels) {
  const int64_t lane = threadIdx.x % kWarp;
  const T inv_c = T(1) / static_cast<T>(channels);
  REMAT_WARP_ROWS(r, rows) {
    const T* dy = dout + r * channels;
    const T* xr = x + r * channels;
    const T m = mean[r], rs = rstd[r];
    T sum_g = 0, sum_gx = 0;
    for (int64_t j = lane; j < channels; j += kWarp) {
      const T g = weight ? dy[j] * weight[j] : dy[j];
      sum_g += g;
      sum_gx += g * ((xr[j] - m) * rs);
    }
    warp_sum_pair(sum_g, sum_gx);
    const T mean_g = sum_g * inv_c, mean_gx = sum_gx * inv_c;
    for (int64_t j = lane; j < channels; j += kWarp) {
      const T g = weight ? dy[j] * weight[j] : dy[j];
      dx[r * channels + j] = rs * (g - mean_g - (xr[j] - m) * rs * mean_gx);
    }
  }
}

#undef REMAT_WARP_ROWS

// Column sums' terms for dweight and dbias at (r, j): dout[r, j] xhat[r, j]
// and dout[r, j] (reduce.cuh's column_sums; see the top of the file).
template <class T>
struct WeightAndBiasTerms {
  const T *dout, *x, *mean, *rstd;
  int64_t channels;
  __device__ void operator()(int64_t r, int64_t j, T (&v)[2]) const {
    const T dy = dout[r * channels + j];
    v[0] = dy * ((x[r * channels + j] - mean[r]) * rstd[r]);
    v[1] = dy;
  }
};

unsigned warp_row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::clamp<int64_t>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, 1, kMaxBlocks));
}

}  // namespace

template <class T>
void layer_norm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, int64_t rows,
                        int64_t channels, double eps, Stream stream) {
  if (rows == 0) return;
  launch("layer_norm_forward_rows", forward_rows<T>, {warp_row_blocks(rows), kThreads}, stream, out, mean, rstd, x,
         weight, bias, rows, channels, eps);
}

template <class T>
void layer_norm_apply(T* out, const T* mean, const T* rstd, const T* x, const T* weight, const T* bias, int64_t rows,
                      int64_t channels, Stream stream) {
  if (rows == 0 || channels == 0) return;
  // A row's channels rounded up to a warp (at most kThreads) a block; blocks
  // along x to cover a row, along y up to about 8192 blocks in all.
  const int64_t threads = std::clamp<int64_t>((channels + kWarp - 1) / kWarp * kWarp, kWarp, kThreads);
  const int64_t x_blocks = std::clamp<int64_t>((channels + threads - 1) / threads, 1, kMaxBlocks);
  const int64_t y_blocks = std::clamp<int64_t>(std::min<int64_t>(rows, 8192 / x_blocks), 1, 65535);
  launch("layer_norm_apply_rows", apply_rows<T>,
         {dim3(static_cast<unsigned>(x_blocks), static_cast<unsigned>(y_blocks)), dim3(static_cast<unsigned>(threads))},
         stream, out, mean, rstd, x, weight, bias, rows, channels);
}

template <class T>
void layer_norm_backward(T* dx, T* dweight, T* dbias, T* scratch, const T* dout, const T* x, const T* weight,
                         const T* mean, const T* rstd, int64_t rows, int64_t channels, int64_t, Stream stream) {
  if (dx && rows > 0) {
    launch("layer_norm_backward_dx_rows", backward_dx_rows<T>, {warp_row_blocks(rows), kThreads}, stream, dx, dout, x,
           weight, mean, rstd, rows, channels);
  }
  if (dweight || dbias) {
    column_sums<T, 2>({"layer_norm_backward_column_sums", "layer_norm_backward_column_chunks"}, {dweight, dbias}, rows,
                      channels, WeightAndBiasTerms<T>{dout, x, mean, rstd, channels}, stream);
  }
}

#define REMAT_INSTANTIATE_LAYER_NORM(T)                                                                         \
  template void layer_norm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t, double,      \
                                      Stream);                                                                  \
  template void layer_norm_apply<T>(T*, const T*, const T*, const T*, const T*, const T*, int64_t, int64_t,    \
                                    Stream);                                                                    \
  template void layer_norm_backward<T>(T*, T*, T*, T*, const T*, const T*, const T*, const T*, const T*,       \
                                       int64_t, int64_t, int64_t, Stream);
REMAT_INSTANTIATE_LAYER_NORM(float)
REMAT_INSTANTIATE_LAYER_NORM(double)
#undef REMAT_INSTANTIATE_LAYER_NORM

}  // namespace remat::kernels::cuda
