// RMS norm on the GPU; see rms_norm.h.
//
// How the work is split:
// - The forward, its replay (rms_norm_apply) and backward's dx: rows.cuh's
//   launch_rows, a WARP PER ROW below 1024 channels and a BLOCK PER ROW from
//   there (Llama's 4096). Thread k of the team takes channels k, k + size,
//   ... in order; the team sums with the xor butterfly (then the block's
//   warps in warp order). The sum of squares is in T, its mean, eps and the
//   square root in double, rounded once to T, as on the CPU.
// - dweight, a sum over rows per channel: reduce.cuh's column_sums (Note
//   [Column sums in chunks]): tiles of channels, row slices added in slice
//   order, and, when the tiles are few, fixed chunks of rows added in chunk
//   order by a second pass.
// Which thread adds which terms, and in which order, depends on the shape
// alone: every run repeats bit for bit; there are no atomics.
#include "kernels/cuda/rms_norm.h"

#include <math.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/rows.cuh"

namespace remat::kernels::cuda {
namespace {

using namespace rowwise;  // rows.cuh: teams, their sums, launch_rows

// out (C) = (x * r) * weight, the CPU's order (Hugging Face's).
template <class T>
__device__ inline T scaled(T x, T r, const T* weight, int64_t j) {
  const T y = x * r;
  return weight ? y * weight[j] : y;
}

template <class T>
struct ForwardRow {
  using Value = T;
  T *out, *rstd;
  const T *x, *weight;
  int64_t channels;
  double eps;
  template <class Team>
  __device__ void operator()(const Team& team, int64_t r) const {
    const T* xr = x + r * channels;  // (C)
    T sum_sq = 0;
    for (int64_t j = team.rank(); j < channels; j += team.size()) sum_sq += xr[j] * xr[j];
    sum_sq = team.sum(sum_sq);
    const T rs = static_cast<T>(1.0 / sqrt(static_cast<double>(sum_sq) / static_cast<double>(channels) + eps));
    if (team.rank() == 0) rstd[r] = rs;
    for (int64_t j = team.rank(); j < channels; j += team.size()) out[r * channels + j] = scaled(xr[j], rs, weight, j);
  }
};

template <class T>
struct ApplyRow {
  using Value = T;
  T* out;
  const T *rstd, *x, *weight;
  int64_t channels;
  template <class Team>
  __device__ void operator()(const Team& team, int64_t r) const {
    const T rs = rstd[r];
    for (int64_t j = team.rank(); j < channels; j += team.size()) {
      out[r * channels + j] = scaled(x[r * channels + j], rs, weight, j);
    }
  }
};

// dx = rstd (g - xhat mean_C(g xhat)), xhat = x rstd, g = dout weight.
template <class T>
struct BackwardDxRow {
  using Value = T;
  T* dx;
  const T *dout, *x, *weight, *rstd;
  int64_t channels;
  template <class Team>
  __device__ void operator()(const Team& team, int64_t r) const {
    const T* dy = dout + r * channels;  // (C)
    const T* xr = x + r * channels;     // (C)
    const T rs = rstd[r];
    T sum_gx = 0;
    for (int64_t j = team.rank(); j < channels; j += team.size()) {
      const T g = weight ? dy[j] * weight[j] : dy[j];
      sum_gx += g * (xr[j] * rs);
    }
    const T mean_gx = team.sum(sum_gx) * (T(1) / static_cast<T>(channels));
    for (int64_t j = team.rank(); j < channels; j += team.size()) {
      const T g = weight ? dy[j] * weight[j] : dy[j];
      dx[r * channels + j] = rs * (g - xr[j] * rs * mean_gx);
    }
  }
};

// dweight's term at (r, j): dout[r, j] xhat[r, j] (reduce.cuh's column_sums).
template <class T>
struct WeightTerm {
  const T *dout, *x, *rstd;
  int64_t channels;
  __device__ void operator()(int64_t r, int64_t j, T (&v)[1]) const {
    v[0] = dout[r * channels + j] * (x[r * channels + j] * rstd[r]);
  }
};

}  // namespace

template <class T>
void rms_norm_forward(T* out, T* rstd, const T* x, const T* weight, int64_t rows, int64_t channels, double eps,
                      Stream stream) {
  launch_rows("rms_norm_forward_warp_rows", "rms_norm_forward_block_rows",
              ForwardRow<T>{out, rstd, x, weight, channels, eps}, rows, channels, stream);
}

template <class T>
void rms_norm_apply(T* out, const T* rstd, const T* x, const T* weight, int64_t rows, int64_t channels,
                    Stream stream) {
  launch_rows("rms_norm_apply_warp_rows", "rms_norm_apply_block_rows", ApplyRow<T>{out, rstd, x, weight, channels},
              rows, channels, stream);
}

template <class T>
void rms_norm_backward(T* dx, T* dweight, T*, const T* dout, const T* x, const T* weight, const T* rstd,
                       int64_t rows, int64_t channels, int64_t, Stream stream) {
  if (dx) {
    launch_rows("rms_norm_backward_dx_warp_rows", "rms_norm_backward_dx_block_rows",
                BackwardDxRow<T>{dx, dout, x, weight, rstd, channels}, rows, channels, stream);
  }
  if (dweight) {
    column_sums<T, 1>({"rms_norm_backward_column_sums", "rms_norm_backward_column_chunks"}, {dweight}, rows, channels,
                      WeightTerm<T>{dout, x, rstd, channels}, stream);
  }
}

#define REMAT_INSTANTIATE_RMS_NORM(T)                                                                          \
  template void rms_norm_forward<T>(T*, T*, const T*, const T*, int64_t, int64_t, double, Stream);            \
  template void rms_norm_apply<T>(T*, const T*, const T*, const T*, int64_t, int64_t, Stream);                \
  template void rms_norm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, int64_t, int64_t,     \
                                     int64_t, Stream);
REMAT_INSTANTIATE_RMS_NORM(float)
REMAT_INSTANTIATE_RMS_NORM(double)
#undef REMAT_INSTANTIATE_RMS_NORM

}  // namespace remat::kernels::cuda
