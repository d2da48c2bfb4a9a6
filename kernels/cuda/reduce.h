// The CUDA twin of kernels/cpu/reduce.h's squared_norm (more reductions come
// with their ops).
#pragma once

#include <cstdint>

#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

// sum of x[i]^2 over x (n), accumulated in double; waits for `stream` (the
// host reads the sum). The same every run: fixed blocks, partial sums added
// in block order.
template <class T>
double squared_norm(const T* x, int64_t n, Stream stream);

}  // namespace remat::kernels::cuda
