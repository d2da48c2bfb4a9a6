// Strided copies on top of for_each_row; element sizes 2, 4 and 8 get typed
// loops, which the compiler turns into wide moves.
#include "kernels/cpu/copy.h"

#include <cstring>

#include "kernels/cpu/strided.h"

namespace remat::kernels::cpu {
namespace {

template <class T>
void copy_typed(T* dst, const std::vector<int64_t>& dst_strides, const T* src, const std::vector<int64_t>& src_strides,
                const std::vector<int64_t>& shape) {
  for_each_row<2>(shape, {&dst_strides, &src_strides}, true,
                  [&](const std::array<int64_t, 2>& at, int64_t n, const std::array<int64_t, 2>& step) {
    T* d = dst + at[0];
    const T* s = src + at[1];
    if (step[0] == 1 && step[1] == 1) {
      std::memcpy(d, s, static_cast<size_t>(n) * sizeof(T));
    } else {
      for (int64_t i = 0; i < n; ++i) d[i * step[0]] = s[i * step[1]];
    }
  });
}

}  // namespace

void strided_copy(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
                  const std::vector<int64_t>& src_strides, size_t element_size, const std::vector<int64_t>& shape, Host) {
  switch (element_size) {
    case 2:
      copy_typed(static_cast<uint16_t*>(dst), dst_strides, static_cast<const uint16_t*>(src), src_strides, shape);
      break;
    case 4:
      copy_typed(static_cast<uint32_t*>(dst), dst_strides, static_cast<const uint32_t*>(src), src_strides, shape);
      break;
    case 8:
      copy_typed(static_cast<uint64_t*>(dst), dst_strides, static_cast<const uint64_t*>(src), src_strides, shape);
      break;
    default: break;
  }
}

void strided_copy(void* dst, const void* src, size_t element_size, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides, Host) {
  strided_copy(dst, dense_strides(shape), src, strides, element_size, shape);
}

}  // namespace remat::kernels::cpu
