// The CUDA twin of kernels/cpu/binary.h: out (dense, `shape`) = a (op) b,
// a and b read through strides over `shape` (0 on broadcast axes).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/args.h"
#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

template <class T>
void binary_forward(BinaryOp op, T* out, const T* a, const std::vector<int64_t>& a_strides, const T* b,
                    const std::vector<int64_t>& b_strides, const std::vector<int64_t>& shape, Stream stream);

}  // namespace remat::kernels::cuda
