// Rotary embeddings on the GPU; see rotary.h. The table: a thread an
// entry (t, i), each computing its inv_freq (a powf is cheap beside the
// launch). The rotation: rows (b, h, t) by blockIdx.y (then gridDim.y on),
// the row's D/2 pairs by the block's threads along x, so that a thread
// finds its row's start once a row and indexes pairs with no division; it
// reads x_i and x_{i+h} and writes both outputs of its pair.
#include "kernels/cuda/rotary.h"

#include <math.h>

#include <algorithm>

#include "kernels/cuda/launch.cuh"

namespace remat::kernels::cuda {
namespace {

__device__ inline float pow_of(float b, float e) { return powf(b, e); }
__device__ inline double pow_of(double b, double e) { return pow(b, e); }
__device__ inline float cos_of(float v) { return cosf(v); }
__device__ inline double cos_of(double v) { return cos(v); }
__device__ inline float sin_of(float v) { return sinf(v); }
__device__ inline double sin_of(double v) { return sin(v); }

// cos, sin (T, D/2): the CPU's steps (kernels/cpu/rotary.h), in T.
template <class T>
__global__ void table_kernel(T* cos, T* sin, int64_t len, int64_t dim, T base) {
  const int64_t half = dim / 2;
  REMAT_GRID_STRIDE(k, len * half) {
    const int64_t t = k / half, i = k % half;
    const T inv_freq = T(1) / pow_of(base, static_cast<T>(2 * i) / static_cast<T>(dim));
    const T angle = static_cast<T>(t) * inv_freq;
    cos[k] = cos_of(angle);
    sin[k] = sin_of(angle);
  }
}

// out (B, H, T, D) dense from x (dims' layout); kInverse turns by -angle.
template <class T, bool kInverse>
__global__ void rotate_kernel(T* out, const T* x, const T* cos, const T* sin, RotaryDims d) {
  const int64_t half = d.dim / 2, rows = d.batch * d.heads * d.len;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t t = r % d.len, bh = r / d.len;
    const T* xr = x + (bh / d.heads) * d.batch_stride + (bh % d.heads) * d.head_stride + t * d.token_stride;  // (D)
    const T* c = cos + t * half;  // (D/2)
    const T* s = sin + t * half;  // (D/2)
    T* o = out + r * d.dim;       // (D)
    for (int64_t i = first; i < half; i += step) {
      const T a = xr[i], b = xr[i + half];
      if constexpr (kInverse) {
        o[i] = a * c[i] + b * s[i];
        o[i + half] = b * c[i] - a * s[i];
      } else {
        o[i] = a * c[i] - b * s[i];
        o[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

template <class T, bool kInverse>
void rotate(const char* name, T* out, const T* x, const T* cos, const T* sin, const RotaryDims& d, Stream stream) {
  const int64_t rows = d.batch * d.heads * d.len, half = d.dim / 2;
  if (rows == 0 || half == 0) return;
  // A row's pairs rounded up to a warp (at most kThreads) a block; blocks
  // along x to cover a row, along y up to about 8192 blocks in all.
  const int64_t threads = std::clamp<int64_t>((half + 31) / 32 * 32, 32, kThreads);
  const int64_t x_blocks = std::clamp<int64_t>((half + threads - 1) / threads, 1, 4096);
  const int64_t y_blocks = std::clamp<int64_t>(std::min<int64_t>(rows, 8192 / x_blocks), 1, 65535);
  launch(name, rotate_kernel<T, kInverse>,
         {dim3(static_cast<unsigned>(x_blocks), static_cast<unsigned>(y_blocks)), dim3(static_cast<unsigned>(threads))},
         stream, out, x, cos, sin, d);
}

}  // namespace

template <class T>
void rotary_table(T* cos, T* sin, int64_t len, int64_t dim, double theta, Stream stream) {
  const int64_t entries = len * (dim / 2);
  if (entries == 0) return;
  launch("rotary_table", table_kernel<T>, {blocks_for(entries), kThreads}, stream, cos, sin, len, dim,
         static_cast<T>(theta));
}

template <class T>
void rotary_forward(T* out, const T* x, const T* cos, const T* sin, const RotaryDims& dims, Stream stream) {
  rotate<T, false>("rotary_forward", out, x, cos, sin, dims, stream);
}

template <class T>
void rotary_backward(T* dx, const T* dout, const T* cos, const T* sin, const RotaryDims& dims, Stream stream) {
  rotate<T, true>("rotary_backward", dx, dout, cos, sin, dims, stream);
}

#define REMAT_INSTANTIATE_ROTARY(T)                                                                    \
  template void rotary_table<T>(T*, T*, int64_t, int64_t, double, Stream);                             \
  template void rotary_forward<T>(T*, const T*, const T*, const T*, const RotaryDims&, Stream);        \
  template void rotary_backward<T>(T*, const T*, const T*, const T*, const RotaryDims&, Stream);
REMAT_INSTANTIATE_ROTARY(float)
REMAT_INSTANTIATE_ROTARY(double)
#undef REMAT_INSTANTIATE_ROTARY

}  // namespace remat::kernels::cuda
