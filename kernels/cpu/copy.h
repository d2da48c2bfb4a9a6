// Strided copies for any element size: gather a strided view into dense
// memory (contiguous()), or write one strided view into another (the
// backward of slice, concat).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

// dst (numel(shape) elements, dense) <- src read with `strides` (in elements).
void strided_copy(void* dst, const void* src, size_t element_size, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides, Host = {});

// dst read/written with dst_strides <- src read with src_strides.
void strided_copy(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
                  const std::vector<int64_t>& src_strides, size_t element_size, const std::vector<int64_t>& shape, Host = {});

}  // namespace remat::kernels::cpu
