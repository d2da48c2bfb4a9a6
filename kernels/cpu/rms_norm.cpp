// RMS normalisation kernels; see rms_norm.h. Rows are independent, so the
// forward and dx split rows over threads above 2 * kParallelGrain
// elements. dweight, a column sum, goes to a partial row per fixed block
// of rows, added in block order at the end: the same bits from run to run
// and at any thread count (Note [Row blocks fixed by the shape]).
#include "kernels/cpu/rms_norm.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_block_sums.h"

namespace remat::kernels::cpu {
namespace {

// out (C) = (x * r) * weight: the last pass of the forward, and all of
// rms_norm_apply's, so that both give the same bits. The order is Hugging
// Face's (weight * (x * rsqrt(...))).
template <class T>
void scale_row(T* out, const T* x, const T* weight, T r, int64_t c) {
  if (weight) {
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) out[j] = x[j] * r * weight[j];
  } else {
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) out[j] = x[j] * r;
  }
}

// One row of the forward: x, out (C); writes *rstd. The sum of squares is
// a vector reduction in T (no cancellation: every term is >= 0); the mean,
// eps and the square root are taken in double and rounded to T once, the
// rstd that backward reads.
template <class T>
void forward_row(T* out, T* rstd, const T* x, const T* weight, int64_t c, double eps) {
  T sum_sq = 0;
#pragma omp simd reduction(+ : sum_sq)
  for (int64_t j = 0; j < c; ++j) sum_sq += x[j] * x[j];
  const double mean_sq = static_cast<double>(sum_sq) / static_cast<double>(c);
  const T r = static_cast<T>(1.0 / std::sqrt(mean_sq + eps));
  *rstd = r;
  scale_row(out, x, weight, r, c);
}

// Rows [begin, end) of the backward, adding into dweight (C). Which
// pointers are null is a template argument, so each loop is branch-free.
template <class T, bool kDx, bool kWeight, bool kDWeight>
void backward_rows(T* dx, T* dweight, const T* dout, const T* x, const T* weight, const T* rstd, int64_t begin,
                   int64_t end, int64_t c) {
  const T inv_c = T(1) / static_cast<T>(c);
  for (int64_t r = begin; r < end; ++r) {
    const T* dy = dout + r * c;  // (C)
    const T* xr = x + r * c;     // (C)
    const T rs = rstd[r];
    // One pass for dweight's terms and the row mean dx needs.
    T sum_gx = 0;
#pragma omp simd reduction(+ : sum_gx)
    for (int64_t j = 0; j < c; ++j) {
      const T xhat = xr[j] * rs;
      if constexpr (kDWeight) dweight[j] += dy[j] * xhat;
      if constexpr (kDx) {
        const T g = kWeight ? dy[j] * weight[j] : dy[j];
        sum_gx += g * xhat;
      }
    }
    if constexpr (kDx) {
      const T mean_gx = sum_gx * inv_c;
      T* dxr = dx + r * c;  // (C)
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) {
        const T g = kWeight ? dy[j] * weight[j] : dy[j];
        dxr[j] = rs * (g - xr[j] * rs * mean_gx);
      }
    }
  }
}

// backward_rows with its template arguments read off which pointers are null.
template <class T>
void backward_rows_dispatch(T* dx, T* dweight, const T* dout, const T* x, const T* weight, const T* rstd,
                            int64_t begin, int64_t end, int64_t c) {
  const auto run = [&]<bool kDx, bool kWeight, bool kDWeight>() {
    backward_rows<T, kDx, kWeight, kDWeight>(dx, dweight, dout, x, weight, rstd, begin, end, c);
  };
  const auto with_sums = [&]<bool kDx, bool kWeight>() {
    if (dweight) run.template operator()<kDx, kWeight, true>();
    else run.template operator()<kDx, kWeight, false>();
  };
  if (dx && weight) with_sums.template operator()<true, true>();
  else if (dx) with_sums.template operator()<true, false>();
  else with_sums.template operator()<false, false>();  // without dx, weight is not read
}

}  // namespace

template <class T>
void rms_norm_forward(T* out, T* rstd, const T* x, const T* weight, int64_t rows, int64_t channels, double eps,
                      Host) {
#pragma omp parallel for schedule(static) if (rows * channels >= 2 * kParallelGrain && num_threads() > 1)
  for (int64_t r = 0; r < rows; ++r) {
    forward_row(out + r * channels, rstd + r, x + r * channels, weight, channels, eps);
  }
}

template <class T>
void rms_norm_apply(T* out, const T* rstd, const T* x, const T* weight, int64_t rows, int64_t channels, Host) {
#pragma omp parallel for schedule(static) if (rows * channels >= 2 * kParallelGrain && num_threads() > 1)
  for (int64_t r = 0; r < rows; ++r) scale_row(out + r * channels, x + r * channels, weight, rstd[r], channels);
}

int64_t rms_norm_backward_blocks(int64_t rows, int64_t channels) { return row_block_count(rows, channels); }
int64_t rms_norm_backward_scratch(int64_t blocks, int64_t channels) { return row_block_scratch(blocks, 1, channels); }

template <class T>
void rms_norm_backward(T* dx, T* dweight, T* scratch, const T* dout, const T* x, const T* weight, const T* rstd,
                       int64_t rows, int64_t channels, int64_t blocks, Host) {
  sum_over_row_blocks<1>(std::array<T*, 1>{dweight}, scratch, rows, channels, blocks,
                         [&](const std::array<T*, 1>& sums, int64_t begin, int64_t end) {
    backward_rows_dispatch(dx, sums[0], dout, x, weight, rstd, begin, end, channels);
  });
}

#define REMAT_INSTANTIATE_RMS_NORM(T)                                                                          \
  template void rms_norm_forward<T>(T*, T*, const T*, const T*, int64_t, int64_t, double, Host);              \
  template void rms_norm_apply<T>(T*, const T*, const T*, const T*, int64_t, int64_t, Host);                  \
  template void rms_norm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, int64_t, int64_t,     \
                                     int64_t, Host);
REMAT_INSTANTIATE_RMS_NORM(float)
REMAT_INSTANTIATE_RMS_NORM(double)
#undef REMAT_INSTANTIATE_RMS_NORM

}  // namespace remat::kernels::cpu
