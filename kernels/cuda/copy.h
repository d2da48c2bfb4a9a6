// The CUDA twins of kernels/cpu/copy.h: strided copies on one GPU, and
// which of copy.cu's paths a copy takes (so that tests can hold a shape to
// its path).
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

// How strided_copy moves a shape, once neighbouring axes that both sides
// walk as one are merged: Nothing (no elements); Memcpy (both contiguous:
// one device-to-device copy); TwoAxes (one or two axes left: rows and
// columns, elementwise.cuh's map_rows); Rows (three or more: the last axis
// as rows, each row's offsets found once; copy.cu). No path divides an
// index per element.
enum class CopyPath { Nothing, Memcpy, TwoAxes, Rows };
CopyPath strided_copy_path(const std::vector<int64_t>& dst_strides, const std::vector<int64_t>& src_strides,
                           const std::vector<int64_t>& shape);
// strided_copy calls that took `path` since the process began.
uint64_t strided_copies_taken(CopyPath path);

}  // namespace remat::kernels::cuda
