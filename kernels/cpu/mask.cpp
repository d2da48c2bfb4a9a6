// masked_fill on strided operands; see mask.h. Built on for_each_row, so a
// (T, T) mask broadcast over (B, H, T, T) scores runs as dense rows.
#include "kernels/cpu/mask.h"

#include <cstddef>  // size_t, which strided.h uses without including

#include "kernels/cpu/strided.h"

namespace remat::kernels::cpu {

template <class T, class M>
void masked_fill_forward(T* out, const T* x, const std::vector<int64_t>& x_strides, const M* mask,
                         const std::vector<int64_t>& mask_strides, const std::vector<int64_t>& shape, T value, Host) {
  const std::vector<int64_t> out_strides = dense_strides(shape);
  for_each_row<3>(shape, {&out_strides, &x_strides, &mask_strides}, true,
                  [&](const std::array<int64_t, 3>& at, int64_t n, const std::array<int64_t, 3>& inner) {
    // `fill`, a local copy: a store through `o` could alias the captured
    // `value` as far as the compiler knows, which kept this loop scalar.
    // out may be x itself (backward writing over its incoming gradient).
    T* o = out + at[0];
    const T* a = x + at[1];
    const M* m = mask + at[2];
    const T fill = value;
    if (inner[1] == 1 && inner[2] == 1) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = m[i] != M(0) ? fill : a[i];
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = m[i * inner[2]] != M(0) ? fill : a[i * inner[1]];
    }
  });
}

void causal_mask_forward(int64_t* mask, int64_t t, Host) {
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = 0; j < t; ++j) mask[i * t + j] = j > i ? 1 : 0;
  }
}

#define REMAT_INSTANTIATE_MASK(T, M)                                                                  \
  template void masked_fill_forward<T, M>(T*, const T*, const std::vector<int64_t>&, const M*,       \
                                          const std::vector<int64_t>&, const std::vector<int64_t>&, T, Host);

REMAT_INSTANTIATE_MASK(float, int64_t)
REMAT_INSTANTIATE_MASK(float, float)
REMAT_INSTANTIATE_MASK(double, int64_t)
REMAT_INSTANTIATE_MASK(double, double)

}  // namespace remat::kernels::cpu
