// for_each_row: walks K strided operands over one shape, row by row.
//
// Every elementwise, copy and reduction kernel on strided memory is built on
// this: it merges axes that are contiguous for all operands (so a dense
// tensor is one long row), then calls
//     row(offsets, n, inner_strides)
// for each innermost row, where offsets[k] is operand k's element offset of
// the row start and inner_strides[k] its step along the row. Rows run on
// several threads when `parallel` and the work is large; the caller then
// guarantees that rows write disjoint memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/shapes.h"

namespace remat::kernels::cpu {

using kernels::dense_strides;  // kernels/shapes.h

template <size_t K>
struct StridedLayout {
  std::vector<int64_t> shape;
  std::array<std::vector<int64_t>, K> strides;
};

// Drops size-1 axes and merges axes that are contiguous in every operand.
template <size_t K>
StridedLayout<K> coalesce(const std::vector<int64_t>& shape, const std::array<const std::vector<int64_t>*, K>& strides) {
  StridedLayout<K> out;
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    if (shape[axis] == 1) continue;
    bool merge = !out.shape.empty();
    for (size_t k = 0; k < K && merge; ++k) {
      merge = out.strides[k].back() == (*strides[k])[axis] * shape[axis];
    }
    if (merge) {
      out.shape.back() *= shape[axis];
      for (size_t k = 0; k < K; ++k) out.strides[k].back() = (*strides[k])[axis];
    } else {
      out.shape.push_back(shape[axis]);
      for (size_t k = 0; k < K; ++k) out.strides[k].push_back((*strides[k])[axis]);
    }
  }
  if (out.shape.empty()) {
    out.shape.push_back(1);
    for (size_t k = 0; k < K; ++k) out.strides[k].push_back(0);
  }
  return out;
}

template <size_t K, class Row>
void for_each_row(const std::vector<int64_t>& shape, const std::array<const std::vector<int64_t>*, K>& strides,
                  bool parallel, Row&& row) {
  for (int64_t s : shape) {
    if (s == 0) return;
  }
  const StridedLayout<K> layout = coalesce<K>(shape, strides);
  const size_t dims = layout.shape.size();
  const int64_t n = layout.shape.back();
  std::array<int64_t, K> inner;
  for (size_t k = 0; k < K; ++k) inner[k] = layout.strides[k].back();
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < dims; ++d) rows *= layout.shape[d];

  auto offsets_of_row = [&](int64_t r) {
    std::array<int64_t, K> offsets{};
    for (size_t d = dims - 1; d-- > 0;) {
      const int64_t i = r % layout.shape[d];
      r /= layout.shape[d];
      for (size_t k = 0; k < K; ++k) offsets[k] += i * layout.strides[k][d];
    }
    return offsets;
  };

  if (parallel && rows == 1) {
    // One long row: in in_chunks's chunks, which are the same at any thread
    // count, so each element sits at the same place of a row call.
    in_chunks(n, [&](int64_t begin, int64_t end) {
      std::array<int64_t, K> offsets;
      for (size_t k = 0; k < K; ++k) offsets[k] = begin * inner[k];
      row(offsets, end - begin, inner);
    });
    return;
  }
  if (parallel && rows * n >= 2 * kParallelGrain && num_threads() > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) row(offsets_of_row(r), n, inner);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) row(offsets_of_row(r), n, inner);
}

}  // namespace remat::kernels::cpu
