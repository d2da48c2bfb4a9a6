// Strided copies on the GPU; see copy.h. One thread an element, moved as an
// integer of the element's size (1, 2, 4 or 8 bytes).
#include "kernels/cuda/copy.h"

#include "kernels/cuda/launch.cuh"
#include "kernels/shapes.h"

namespace remat::kernels::cuda {
namespace {

template <class E>
void copy_as(void* dst, const void* src, const StridedArgs<2>& args, int64_t n, Stream stream) {
  E* d = static_cast<E*>(dst);
  const E* s = static_cast<const E*>(src);
  launch_elementwise(n, stream, [=] __device__(int64_t i) {
    const Offsets<2> at = offsets_of(args, i);
    d[at.at[0]] = s[at.at[1]];
  });
}

void copy_sized(void* dst, const void* src, size_t element_size, const StridedArgs<2>& args, int64_t n,
                Stream stream) {
  switch (element_size) {
    case 1: return copy_as<uint8_t>(dst, src, args, n, stream);
    case 2: return copy_as<uint16_t>(dst, src, args, n, stream);
    case 4: return copy_as<uint32_t>(dst, src, args, n, stream);
    case 8: return copy_as<uint64_t>(dst, src, args, n, stream);
    default: fail("strided_copy", "elements of " + std::to_string(element_size) + " bytes", __FILE__, __LINE__);
  }
}

}  // namespace

void strided_copy(void* dst, const void* src, size_t element_size, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides, Stream stream) {
  const std::vector<int64_t> dense = dense_strides(shape);
  copy_sized(dst, src, element_size, strided_args<2>(shape, {&dense, &strides}), numel_of(shape), stream);
}

void strided_copy(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
                  const std::vector<int64_t>& src_strides, size_t element_size, const std::vector<int64_t>& shape,
                  Stream stream) {
  copy_sized(dst, src, element_size, strided_args<2>(shape, {&dst_strides, &src_strides}), numel_of(shape), stream);
}

}  // namespace remat::kernels::cuda
