// Softmax, log-softmax and cross-entropy kernels; see softmax.h. Each row is
// shifted by its maximum before exp, so large logits do not overflow.
#include "kernels/cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/fast_math.h"

namespace remat::kernels::cpu {
namespace {

// Calls body(base, stride) for each of the outer*inner rows of length n,
// whose elements are base + i * stride. When inner == 1 (normalising the last
// axis, the common case) stride is the compile-time constant 1, so that the
// row loops vectorise.
template <class Body>
void for_each_softmax_row(int64_t outer, int64_t n, int64_t inner, Body body) {
  if (inner == 1) {
#pragma omp parallel for schedule(static) if (outer * n >= 65536)
    for (int64_t o = 0; o < outer; ++o) body(o * n, std::integral_constant<int64_t, 1>{});
    return;
  }
#pragma omp parallel for collapse(2) schedule(static) if (outer * n * inner >= 65536)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) body(o * n * inner + j, inner);
  }
}

// The largest element, kept in kLanes running maxima (two AVX vectors of
// float, four of double) over all but short rows: GCC leaves a max
// reduction of one running value scalar (std::max is no IEEE operation it
// may reorder), a chain of dependent instructions, one per element, that
// took a third of W2's softmax. Without NaNs the result is the scalar
// loop's (no order of comparisons changes a maximum; at most the sign of a
// zero maximum differs, which no x - m shows). With one, a lane may skip
// elements, but the row comes out NaN whatever this returns (exp(NaN - m)
// is NaN), as it did before.
template <class T, class Stride> T row_max(const T* x, int64_t n, Stride s) {
  constexpr int64_t kLanes = 16;
  T m = x[0];
  int64_t i = 1;
  if (n >= 2 * kLanes) {
    // Every lane starts at x[0], which the maximum includes anyway: copied
    // from x element by element instead, the lanes were stored in halves
    // and loaded whole, a stalled store-to-load forward on every row.
    T lanes[kLanes];
#pragma omp simd
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] = m;
    for (i = 0; i + kLanes <= n; i += kLanes) {
#pragma omp simd
      for (int64_t j = 0; j < kLanes; ++j) {
        const T v = x[(i + j) * s];
        lanes[j] = v > lanes[j] ? v : lanes[j];
      }
    }
    for (int64_t j = 0; j < kLanes; ++j) m = std::max(m, lanes[j]);
  }
  for (; i < n; ++i) m = std::max(m, x[i * s]);
  return m;
}

// A row's maximum m and log(sum exp(x - m)): the statistics of
// log_softmax_forward, and of cross-entropy's forward and backward, which
// recompute log-probabilities (x - m) - log_sum from them. One function,
// kept out of line, so that every caller runs the same instructions: the
// vectorised sum's order of additions is the compiler's choice, and
// cross-entropy's gradients must have log_softmax's bits.
template <class T> struct RowStats {
  T max, log_sum;
};
template <class T, class Stride> [[gnu::noinline]] RowStats<T> row_stats(const T* x, int64_t n, Stride s) {
  const T m = row_max(x, n, s);
  T total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t i = 0; i < n; ++i) total += fast_exp(x[i * s] - m);
  return {m, std::log(total)};
}
}  // namespace

template <class T> void softmax_forward(T* out, const T* x, int64_t outer, int64_t n, int64_t inner, Host) {
  for_each_softmax_row(outer, n, inner, [&](int64_t base, auto s) {
    const T* xr = x + base;
    T* orow = out + base;
    const T m = row_max(xr, n, s);
    T total = 0;
#pragma omp simd reduction(+ : total)
    for (int64_t i = 0; i < n; ++i) {
      orow[i * s] = fast_exp(xr[i * s] - m);
      total += orow[i * s];
    }
    const T inv = T(1) / total;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) orow[i * s] *= inv;
  });
}

template <class T> void softmax_backward(T* dx, const T* dout, const T* out, int64_t outer, int64_t n, int64_t inner, Host) {
  for_each_softmax_row(outer, n, inner, [&](int64_t base, auto s) {
    const T* g = dout + base;
    const T* y = out + base;
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t i = 0; i < n; ++i) dot += g[i * s] * y[i * s];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dx[base + i * s] = y[i * s] * (g[i * s] - dot);
  });
}

template <class T> void log_softmax_forward(T* out, const T* x, int64_t outer, int64_t n, int64_t inner, Host) {
  for_each_softmax_row(outer, n, inner, [&](int64_t base, auto s) {
    const T* xr = x + base;
    // (x - m) - log(total), not x - (m + log(total)): m + log(total) rounds
    // away the small term when m is large (float32 logits near 1000).
    // Named values, not a structured binding: clang 14 cannot capture one
    // into the region `omp simd` outlines.
    const RowStats<T> stats = row_stats(xr, n, s);
    const T m = stats.max, log_total = stats.log_sum;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[base + i * s] = (xr[i * s] - m) - log_total;
  });
}

template <class T>
void log_softmax_backward(T* dx, const T* dout, const T* out, int64_t outer, int64_t n, int64_t inner, Host) {
  for_each_softmax_row(outer, n, inner, [&](int64_t base, auto s) {
    const T* g = dout + base;
    T total = 0;
#pragma omp simd reduction(+ : total)
    for (int64_t i = 0; i < n; ++i) total += g[i * s];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dx[base + i * s] = g[i * s] - fast_exp(out[base + i * s]) * total;
  });
}

// The statistics of every row (as log_softmax_forward, by the same
// row_stats), then the loss in row order; no (rows, classes) buffer.
template <class T>
bool cross_entropy_forward(double* loss_sum, int64_t* count, T* stats, int64_t* bad_row, const T* logits,
                           const int64_t* targets, int64_t rows, int64_t classes, int64_t ignore_index, Host) {
  for_each_softmax_row(rows, classes, 1, [&](int64_t base, auto s) {
    const RowStats<T> row = row_stats(logits + base, classes, s);
    const int64_t r = base / classes;
    stats[2 * r] = row.max;
    stats[2 * r + 1] = row.log_sum;
  });
  double total = 0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = targets[r];
    if (t == ignore_index) continue;
    if (t < 0 || t >= classes) {
      *bad_row = r;
      return false;
    }
    // log_softmax_forward's element: (x - m) - log_sum, rounded to T.
    const T log_prob = (logits[r * classes + t] - stats[2 * r]) - stats[2 * r + 1];
    total -= static_cast<double>(log_prob);
    ++counted;
  }
  *loss_sum = total;
  *count = counted;
  return true;
}

// dlogits[r, c] = scale * exp((x - m) - log_sum), then scale less at the
// target: the bits of scale * exp(log_probs) when log_probs was stored
// (the two-buffer kernel this replaces), since each element's
// log-probability is recomputed by the same two subtractions.
template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* stats, const int64_t* targets, int64_t rows,
                            int64_t classes, int64_t ignore_index, T scale, Host) {
#pragma omp parallel for schedule(static) if (rows * classes >= 65536)
  for (int64_t r = 0; r < rows; ++r) {
    T* d = dlogits + r * classes;
    const T* x = logits + r * classes;
    if (targets[r] == ignore_index) {
      std::fill(d, d + classes, T(0));
      continue;
    }
    const T m = stats[2 * r], log_sum = stats[2 * r + 1];
    for (int64_t c = 0; c < classes; ++c) d[c] = scale * fast_exp((x[c] - m) - log_sum);
    d[targets[r]] -= scale;
  }
}

#define REMAT_INSTANTIATE_SOFTMAX(T)                                                                              \
  template void softmax_forward<T>(T*, const T*, int64_t, int64_t, int64_t, Host);                                       \
  template void softmax_backward<T>(T*, const T*, const T*, int64_t, int64_t, int64_t, Host);                            \
  template void log_softmax_forward<T>(T*, const T*, int64_t, int64_t, int64_t, Host);                                   \
  template void log_softmax_backward<T>(T*, const T*, const T*, int64_t, int64_t, int64_t, Host);                        \
  template bool cross_entropy_forward<T>(double*, int64_t*, T*, int64_t*, const T*, const int64_t*, int64_t,      \
                                         int64_t, int64_t, Host);                                                        \
  template void cross_entropy_backward<T>(T*, const T*, const T*, const int64_t*, int64_t, int64_t, int64_t, T,      \
                                         Host);
REMAT_INSTANTIATE_SOFTMAX(float)
REMAT_INSTANTIATE_SOFTMAX(double)
#undef REMAT_INSTANTIATE_SOFTMAX

}  // namespace remat::kernels::cpu
