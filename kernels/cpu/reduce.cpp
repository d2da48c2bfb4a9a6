// Reduction kernels; see reduce.h.
#include "kernels/cpu/reduce.h"

#include <cmath>

#include "kernels/cpu/strided.h"

namespace remat::kernels::cpu {

template <class T>
void sum_to(T* out, int64_t out_numel, const T* in, const std::vector<int64_t>& in_strides,
            const std::vector<int64_t>& out_strides, const std::vector<int64_t>& shape, Host) {
  for (int64_t i = 0; i < out_numel; ++i) out[i] = T(0);
  // Serial: several rows may add into the same output element.
  for_each_row<2>(shape, {&out_strides, &in_strides}, false,
                  [&](const std::array<int64_t, 2>& at, int64_t n, const std::array<int64_t, 2>& inner) {
    T* o = out + at[0];
    const T* x = in + at[1];
    if (inner[0] == 0) {
      T acc = T(0);
      if (inner[1] == 1) {
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < n; ++i) acc += x[i];
      } else {
        for (int64_t i = 0; i < n; ++i) acc += x[i * inner[1]];
      }
      *o += acc;
    } else if (inner[0] == 1 && inner[1] == 1) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] += x[i];
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * inner[0]] += x[i * inner[1]];
    }
  });
}

template <class T>
void max_along(T* values, int64_t* indices, const T* x, int64_t outer, int64_t n, int64_t inner, Host) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      const T* row = x + o * n * inner + j;
      T best = row[0];
      int64_t best_index = 0;
      for (int64_t i = 1; i < n && !std::isnan(best); ++i) {
        const T v = row[i * inner];
        if (v > best || std::isnan(v)) {
          best = v;
          best_index = i;
        }
      }
      if (values) values[o * inner + j] = best;
      if (indices) indices[o * inner + j] = best_index;
    }
  }
}

template <class T>
void max_along_backward(T* dx, const int64_t* indices, const T* dout, int64_t outer, int64_t n, int64_t inner, Host) {
  std::fill(dx, dx + outer * n * inner, T(0));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) dx[(o * n + indices[o * inner + j]) * inner + j] = dout[o * inner + j];
  }
}

template <class T>
double squared_norm(const T* x, int64_t n, Host) {
  double acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return acc;
}

#define REMAT_INSTANTIATE_REDUCE(T)                                                                              \
  template void sum_to<T>(T*, int64_t, const T*, const std::vector<int64_t>&, const std::vector<int64_t>&,       \
                          const std::vector<int64_t>&, Host);                                              \
  template void max_along<T>(T*, int64_t*, const T*, int64_t, int64_t, int64_t, Host);                         \
  template void max_along_backward<T>(T*, const int64_t*, const T*, int64_t, int64_t, int64_t, Host);          \
  template double squared_norm<T>(const T*, int64_t, Host);
REMAT_INSTANTIATE_REDUCE(float)
REMAT_INSTANTIATE_REDUCE(double)
#undef REMAT_INSTANTIATE_REDUCE

}  // namespace remat::kernels::cpu
