// Reductions. sum_to: adds a strided input into a dense output whose strides
// are 0 along the reduced axes (so any set of axes reduces in one pass).
// max_along: max and argmax along the middle axis of an (outer, n, inner)
// dense array, and its backward. squared_norm: sum of squares, accumulated in double.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

// out (dense, zeroed here) += in, walking `shape` (the input's shape) with
// in_strides and out_strides (0 on every reduced axis).
template <class T>
void sum_to(T* out, int64_t out_numel, const T* in, const std::vector<int64_t>& in_strides,
            const std::vector<int64_t>& out_strides, const std::vector<int64_t>& shape, Host = {});

// values (outer, inner), indices (outer, inner) <- max over n of x (outer, n, inner).
// Ties go to the first index; NaN wins over numbers.
template <class T>
void max_along(T* values, int64_t* indices, const T* x, int64_t outer, int64_t n, int64_t inner, Host = {});
// dx (outer, n, inner) = dout (outer, inner) at indices (outer, inner) along n, 0 elsewhere.
template <class T>
void max_along_backward(T* dx, const int64_t* indices, const T* dout, int64_t outer, int64_t n, int64_t inner,
                        Host = {});

template <class T>
double squared_norm(const T* x, int64_t n, Host = {});

}  // namespace remat::kernels::cpu
