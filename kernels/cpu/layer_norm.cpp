// Layer normalisation kernels; see layer_norm.h. Rows are independent, so
// both passes split rows over threads above 2 * kParallelGrain elements;
// the column sums dweight and dbias go to a partial row per block of rows
// fixed by the shape, added in block order at the end: the same bits from
// run to run and at any thread count (Note [Row blocks fixed by the shape]).
#include "kernels/cpu/layer_norm.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_block_sums.h"

namespace remat::kernels::cpu {
namespace {

// out (C) = (x - m) * r * weight + bias: the last pass of the forward, and
// all of layer_norm_apply's, so that both give the same bits.
template <class T>
void normalise_row(T* out, const T* x, const T* weight, const T* bias, T m, T r, int64_t c) {
  if (weight && bias) {
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) out[j] = (x[j] - m) * r * weight[j] + bias[j];
  } else if (weight) {
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) out[j] = (x[j] - m) * r * weight[j];
  } else if (bias) {
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) out[j] = (x[j] - m) * r + bias[j];
  } else {
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) out[j] = (x[j] - m) * r;
  }
}

// One row of the forward: x, out (C); writes *mean and *rstd. The mean and
// variance are a corrected two-pass in T: a first mean m0, then the sums of
// d = x - m0 and of d^2, which are small numbers even when the row's mean is
// large, so no cancellation: mean = m0 + sum(d)/C, var = sum(d^2)/C - (sum(d)/C)^2.
// Every loop is a vector loop in T (8 floats per AVX2 instruction).
template <class T>
void forward_row(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, int64_t c, double eps) {
  const T inv_c = T(1) / static_cast<T>(c);
  T total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < c; ++j) total += x[j];
  const T m0 = total * inv_c;
  T sum_d = 0, sum_d2 = 0;
#pragma omp simd reduction(+ : sum_d, sum_d2)
  for (int64_t j = 0; j < c; ++j) {
    const T d = x[j] - m0;
    sum_d += d;
    sum_d2 += d * d;
  }
  const double shift = static_cast<double>(sum_d) * static_cast<double>(inv_c);
  const double var = std::max(0.0, static_cast<double>(sum_d2) * static_cast<double>(inv_c) - shift * shift);
  // Normalise with the T-rounded mean and rstd that backward will read, so
  // forward and backward describe the same function.
  const T m = static_cast<T>(static_cast<double>(m0) + shift), r = static_cast<T>(1.0 / std::sqrt(var + eps));
  *mean = m;
  *rstd = r;
  normalise_row(out, x, weight, bias, m, r, c);
}

// Rows [begin, end) of the backward, adding into dweight/dbias (C). Which
// pointers are null is a template argument, so each loop is branch-free.
template <class T, bool kDx, bool kWeight, bool kDWeight, bool kDBias>
void backward_rows(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight, const T* mean,
                   const T* rstd, int64_t begin, int64_t end, int64_t c) {
  const T inv_c = T(1) / static_cast<T>(c);
  for (int64_t r = begin; r < end; ++r) {
    const T* dy = dout + r * c;  // (C)
    const T* xr = x + r * c;     // (C)
    const T m = mean[r], rs = rstd[r];
    // One pass for the column sums and the two row means backward needs.
    T sum_g = 0, sum_gx = 0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
    for (int64_t j = 0; j < c; ++j) {
      const T xhat = (xr[j] - m) * rs;
      if constexpr (kDWeight) dweight[j] += dy[j] * xhat;
      if constexpr (kDBias) dbias[j] += dy[j];
      if constexpr (kDx) {
        const T g = kWeight ? dy[j] * weight[j] : dy[j];
        sum_g += g;
        sum_gx += g * xhat;
      }
    }
    if constexpr (kDx) {
      const T mean_g = sum_g * inv_c, mean_gx = sum_gx * inv_c;
      T* dxr = dx + r * c;  // (C)
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) {
        const T g = kWeight ? dy[j] * weight[j] : dy[j];
        dxr[j] = rs * (g - mean_g - (xr[j] - m) * rs * mean_gx);
      }
    }
  }
}

// backward_rows with its template arguments read off which pointers are null.
template <class T>
void backward_rows_dispatch(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight, const T* mean,
                            const T* rstd, int64_t begin, int64_t end, int64_t c) {
  const auto run = [&]<bool kDx, bool kWeight, bool kDWeight, bool kDBias>() {
    backward_rows<T, kDx, kWeight, kDWeight, kDBias>(dx, dweight, dbias, dout, x, weight, mean, rstd, begin, end, c);
  };
  const auto with_sums = [&]<bool kDx, bool kWeight>() {
    if (dweight && dbias) run.template operator()<kDx, kWeight, true, true>();
    else if (dweight) run.template operator()<kDx, kWeight, true, false>();
    else if (dbias) run.template operator()<kDx, kWeight, false, true>();
    else run.template operator()<kDx, kWeight, false, false>();
  };
  if (dx && weight) with_sums.template operator()<true, true>();
  else if (dx) with_sums.template operator()<true, false>();
  else with_sums.template operator()<false, false>();  // without dx, weight is not read
}

}  // namespace

template <class T>
void layer_norm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, int64_t rows,
                        int64_t channels, double eps, Host) {
#pragma omp parallel for schedule(static) if (rows * channels >= 2 * kParallelGrain && num_threads() > 1)
  for (int64_t r = 0; r < rows; ++r) {
    forward_row(out + r * channels, mean + r, rstd + r, x + r * channels, weight, bias, channels, eps);
  }
}

template <class T>
void layer_norm_apply(T* out, const T* mean, const T* rstd, const T* x, const T* weight, const T* bias, int64_t rows,
                      int64_t channels, Host) {
#pragma omp parallel for schedule(static) if (rows * channels >= 2 * kParallelGrain && num_threads() > 1)
  for (int64_t r = 0; r < rows; ++r) {
    normalise_row(out + r * channels, x + r * channels, weight, bias, mean[r], rstd[r], channels);
  }
}

int64_t layer_norm_backward_blocks(int64_t rows, int64_t channels) { return row_block_count(rows, channels); }
int64_t layer_norm_backward_scratch(int64_t blocks, int64_t channels) {
  return row_block_scratch(blocks, 2, channels);  // (blocks, 2, C): dweight's partial, then dbias's
}

template <class T>
void layer_norm_backward(T* dx, T* dweight, T* dbias, T* scratch, const T* dout, const T* x, const T* weight,
                         const T* mean, const T* rstd, int64_t rows, int64_t channels, int64_t blocks, Host) {
  sum_over_row_blocks<2>(std::array<T*, 2>{dweight, dbias}, scratch, rows, channels, blocks,
                         [&](const std::array<T*, 2>& sums, int64_t begin, int64_t end) {
    backward_rows_dispatch(dx, sums[0], sums[1], dout, x, weight, mean, rstd, begin, end, channels);
  });
}

#define REMAT_INSTANTIATE_LAYER_NORM(T)                                                                    \
  template void layer_norm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t, double, Host); \
  template void layer_norm_apply<T>(T*, const T*, const T*, const T*, const T*, const T*, int64_t, int64_t, Host); \
  template void layer_norm_backward<T>(T*, T*, T*, T*, const T*, const T*, const T*, const T*, const T*,   \
                                       int64_t, int64_t, int64_t, Host);
REMAT_INSTANTIATE_LAYER_NORM(float)
REMAT_INSTANTIATE_LAYER_NORM(double)
#undef REMAT_INSTANTIATE_LAYER_NORM

}  // namespace remat::kernels::cpu
