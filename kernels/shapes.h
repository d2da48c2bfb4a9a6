// Shape arithmetic the kernels of both devices do on the host: the strides
// of a dense array, and where each matrix of a batched GEMM starts.
#pragma once

#include <cstdint>
#include <vector>

namespace remat::kernels {

// Row-major strides of a dense array of `shape` (in elements).
inline std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= shape[i];
  }
  return strides;
}

// For every index i of `batch` (row-major order), the element offset of A_i
// and B_i: sum over axes d of i_d a_strides[d] (0 on an axis A is broadcast
// along), and the same for B.
struct BatchOffsets {
  std::vector<int64_t> a, b;
};
inline BatchOffsets batch_offsets(const std::vector<int64_t>& batch, const std::vector<int64_t>& a_strides,
                                  const std::vector<int64_t>& b_strides) {
  int64_t count = 1;
  for (int64_t size : batch) count *= size;
  BatchOffsets out{std::vector<int64_t>(static_cast<size_t>(count)), std::vector<int64_t>(static_cast<size_t>(count))};
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, a_off = 0, b_off = 0;
    for (size_t d = batch.size(); d-- > 0;) {
      const int64_t index = rest % batch[d];
      rest /= batch[d];
      a_off += index * a_strides[d];
      b_off += index * b_strides[d];
    }
    out.a[static_cast<size_t>(i)] = a_off;
    out.b[static_cast<size_t>(i)] = b_off;
  }
  return out;
}

}  // namespace remat::kernels
