// Layer norm on the GPU; see layer_norm.h. Statistics and dx: one thread a
// row; dweight and dbias: one thread a channel, over the rows in order (no
// atomics, so a run repeats bit for bit).
#include "kernels/cuda/layer_norm.h"

#include "kernels/cuda/launch.cuh"

namespace remat::kernels::cuda {
namespace {

template <class T>
__device__ inline T normalised(T x, T m, T r, const T* weight, const T* bias, int64_t j) {
  T y = (x - m) * r;
  if (weight) y = y * weight[j];
  if (bias) y = y + bias[j];
  return y;
}

}  // namespace

template <class T>
void layer_norm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, int64_t rows,
                        int64_t channels, double eps, Stream stream) {
  launch_elementwise(rows, stream, [=] __device__(int64_t r) {
    const T* xr = x + r * channels;
    const T inv_c = T(1) / static_cast<T>(channels);
    T total = 0;
    for (int64_t j = 0; j < channels; ++j) total += xr[j];
    const T m0 = total * inv_c;
    T sum_d = 0, sum_d2 = 0;
    for (int64_t j = 0; j < channels; ++j) {
      const T d = xr[j] - m0;
      sum_d += d;
      sum_d2 += d * d;
    }
    const double shift = static_cast<double>(sum_d) * static_cast<double>(inv_c);
    const double var = fmax(0.0, static_cast<double>(sum_d2) * static_cast<double>(inv_c) - shift * shift);
    const T m = static_cast<T>(static_cast<double>(m0) + shift), rs = static_cast<T>(1.0 / sqrt(var + eps));
    mean[r] = m;
    rstd[r] = rs;
    for (int64_t j = 0; j < channels; ++j) out[r * channels + j] = normalised(xr[j], m, rs, weight, bias, j);
  });
}

template <class T>
void layer_norm_apply(T* out, const T* mean, const T* rstd, const T* x, const T* weight, const T* bias, int64_t rows,
                      int64_t channels, Stream stream) {
  launch_elementwise(rows * channels, stream, [=] __device__(int64_t e) {
    const int64_t r = e / channels, j = e % channels;
    out[e] = normalised(x[e], mean[r], rstd[r], weight, bias, j);
  });
}

template <class T>
void layer_norm_backward(T* dx, T* dweight, T* dbias, T* scratch, const T* dout, const T* x, const T* weight,
                         const T* mean, const T* rstd, int64_t rows, int64_t channels, int64_t workers, Stream stream) {
  if (dx) {
    launch_elementwise(rows, stream, [=] __device__(int64_t r) {
      const T* dy = dout + r * channels;
      const T* xr = x + r * channels;
      const T m = mean[r], rs = rstd[r], inv_c = T(1) / static_cast<T>(channels);
      T sum_g = 0, sum_gx = 0;
      for (int64_t j = 0; j < channels; ++j) {
        const T g = weight ? dy[j] * weight[j] : dy[j];
        sum_g += g;
        sum_gx += g * ((xr[j] - m) * rs);
      }
      const T mean_g = sum_g * inv_c, mean_gx = sum_gx * inv_c;
      for (int64_t j = 0; j < channels; ++j) {
        const T g = weight ? dy[j] * weight[j] : dy[j];
        dx[r * channels + j] = rs * (g - mean_g - (xr[j] - m) * rs * mean_gx);
      }
    });
  }
  if (dweight || dbias) {
    launch_elementwise(channels, stream, [=] __device__(int64_t j) {
      T sum_w = 0, sum_b = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const T dy = dout[r * channels + j];
        sum_w += dy * ((x[r * channels + j] - mean[r]) * rstd[r]);
        sum_b += dy;
      }
      if (dweight) dweight[j] = sum_w;
      if (dbias) dbias[j] = sum_b;
    });
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
