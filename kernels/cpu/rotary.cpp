// Rotary embedding kernels; see rotary.h. A (b, h, t) row is independent
// of every other, so rows split over threads above 2 * kParallelGrain
// elements (bits do not depend on the split); within a row, the D/2 pairs
// are a vector loop over i reading x_i and x_{i+h} and the table's row t.
// The table is (T, D/2) per call, B * H times smaller than x: one sincos
// per frequency and position instead of one per element.
#include "kernels/cpu/rotary.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace remat::kernels::cpu {
namespace {

// The pairs of one row: out (D) dense, x (D). kInverse turns by -angle.
template <class T, bool kInverse>
void rotate_row(T* out, const T* x, const T* cos, const T* sin, int64_t half) {
  const T* x2 = x + half;  // (D/2): the second half
  T* out2 = out + half;    // (D/2)
#pragma omp simd
  for (int64_t i = 0; i < half; ++i) {
    const T a = x[i], b = x2[i], c = cos[i], s = sin[i];
    if constexpr (kInverse) {
      out[i] = a * c + b * s;
      out2[i] = b * c - a * s;
    } else {
      out[i] = a * c - b * s;
      out2[i] = b * c + a * s;
    }
  }
}

template <class T, bool kInverse>
void rotate(T* out, const T* x, const T* cos, const T* sin, const RotaryDims& d) {
  const int64_t rows = d.batch * d.heads * d.len, half = d.dim / 2;
#pragma omp parallel for schedule(static) if (rows * d.dim >= 2 * kParallelGrain && num_threads() > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r % d.len, bh = r / d.len;
    const T* xr = x + (bh / d.heads) * d.batch_stride + (bh % d.heads) * d.head_stride + t * d.token_stride;
    rotate_row<T, kInverse>(out + r * d.dim, xr, cos + t * half, sin + t * half, half);
  }
}

}  // namespace

template <class T>
void rotary_table(T* cos, T* sin, int64_t len, int64_t dim, double theta, Host) {
  const int64_t half = dim / 2;
  const T base = static_cast<T>(theta);
  std::vector<T> inv_freq(static_cast<size_t>(half));  // (D/2): D/2 powers instead of T * D/2
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[static_cast<size_t>(i)] = T(1) / std::pow(base, static_cast<T>(2 * i) / static_cast<T>(dim));
  }
#pragma omp parallel for schedule(static) if (len * half >= kParallelGrain / 8 && num_threads() > 1)
  for (int64_t t = 0; t < len; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const T angle = static_cast<T>(t) * inv_freq[static_cast<size_t>(i)];
      cos[t * half + i] = std::cos(angle);
      sin[t * half + i] = std::sin(angle);
    }
  }
}

template <class T>
void rotary_forward(T* out, const T* x, const T* cos, const T* sin, const RotaryDims& dims, Host) {
  rotate<T, false>(out, x, cos, sin, dims);
}

template <class T>
void rotary_backward(T* dx, const T* dout, const T* cos, const T* sin, const RotaryDims& dims, Host) {
  rotate<T, true>(dx, dout, cos, sin, dims);
}

#define REMAT_INSTANTIATE_ROTARY(T)                                                                  \
  template void rotary_table<T>(T*, T*, int64_t, int64_t, double, Host);                             \
  template void rotary_forward<T>(T*, const T*, const T*, const T*, const RotaryDims&, Host);         \
  template void rotary_backward<T>(T*, const T*, const T*, const T*, const RotaryDims&, Host);
REMAT_INSTANTIATE_ROTARY(float)
REMAT_INSTANTIATE_ROTARY(double)
#undef REMAT_INSTANTIATE_ROTARY

}  // namespace remat::kernels::cpu
