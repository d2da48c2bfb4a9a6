// The CUDA twins of kernels/cpu/copy.h: strided copies on one GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

// dst (dense, shape) = src read through `strides`.
void strided_copy(void* dst, const void* src, size_t element_size, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides, Stream stream);
// dst read through dst_strides = src read through src_strides, over shape.
void strided_copy(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
                  const std::vector<int64_t>& src_strides, size_t element_size, const std::vector<int64_t>& shape,
                  Stream stream);

}  // namespace remat::kernels::cuda
