// Binary elementwise kernels with broadcasting: out = a (op) b.
// `out` is dense with `shape`; a and b are read through strides of the same
// length as shape (0 on broadcast axes). Dense and row-broadcast cases run
// as plain vector loops; large tensors use every thread.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/args.h"
#include "kernels/cpu/host.h"
#include "kernels/cpu/strided.h"

namespace remat::kernels::cpu {

using kernels::BinaryOp;

template <BinaryOp kOp, class T>
inline T binary_apply(T a, T b) {
  if constexpr (kOp == BinaryOp::Add) return a + b;
  if constexpr (kOp == BinaryOp::Sub) return a - b;
  if constexpr (kOp == BinaryOp::Mul) return a * b;
  if constexpr (kOp == BinaryOp::Div) return a / b;
}

template <BinaryOp kOp, class T>
void binary_forward_op(T* out, const T* a, const std::vector<int64_t>& a_strides, const T* b,
                       const std::vector<int64_t>& b_strides, const std::vector<int64_t>& shape) {
  const std::vector<int64_t> out_strides = dense_strides(shape);
  for_each_row<3>(shape, {&out_strides, &a_strides, &b_strides}, true,
                  [&](const std::array<int64_t, 3>& at, int64_t n, const std::array<int64_t, 3>& inner) {
    T* o = out + at[0];
    const T* x = a + at[1];
    const T* y = b + at[2];
    if (inner[1] == 1 && inner[2] == 1) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = binary_apply<kOp>(x[i], y[i]);
    } else if (inner[1] == 1 && inner[2] == 0) {
      const T yv = *y;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = binary_apply<kOp>(x[i], yv);
    } else if (inner[1] == 0 && inner[2] == 1) {
      const T xv = *x;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = binary_apply<kOp>(xv, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = binary_apply<kOp>(x[i * inner[1]], y[i * inner[2]]);
    }
  });
}

// out may equal a (in-place accumulation) when a is dense with `shape`.
template <class T>
void binary_forward(BinaryOp op, T* out, const T* a, const std::vector<int64_t>& a_strides, const T* b,
                    const std::vector<int64_t>& b_strides, const std::vector<int64_t>& shape, Host = {}) {
  switch (op) {
    case BinaryOp::Add: return binary_forward_op<BinaryOp::Add>(out, a, a_strides, b, b_strides, shape);
    case BinaryOp::Sub: return binary_forward_op<BinaryOp::Sub>(out, a, a_strides, b, b_strides, shape);
    case BinaryOp::Mul: return binary_forward_op<BinaryOp::Mul>(out, a, a_strides, b, b_strides, shape);
    case BinaryOp::Div: return binary_forward_op<BinaryOp::Div>(out, a, a_strides, b, b_strides, shape);
  }
}

}  // namespace remat::kernels::cpu
