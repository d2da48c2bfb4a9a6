// Strided copies on the GPU; see copy.h. Elements move as integers of
// their size (1, 2, 4 or 8 bytes). Both sides contiguous: one
// device-to-device cudaMemcpyAsync (the copy engine's, no kernel). Strides
// that merge into two axes (a transpose of two, a slice of rows): map_rows
// (elementwise.cuh: no index division, 16-byte moves where aligned). Others:
// one thread an element through offsets_of.
#include "kernels/cuda/copy.h"

#include "kernels/cuda/elementwise.cuh"
#include "kernels/shapes.h"

namespace remat::kernels::cuda {
namespace {

template <class E>
void copy_as(void* dst, const void* src, const StridedArgs<2>& args, int64_t n, Stream stream) {
  E* d = static_cast<E*>(dst);
  const E* s = static_cast<const E*>(src);
  if (const MapShape m = map_shape(args); m.fits) {
    map_rows("strided_copy", Dst<E>{d, m.row[0], m.col[0]}, m.rows, m.cols, stream,
             [] __device__(E v) -> E { return v; }, Src<E>{s, m.row[1], m.col[1]});
    return;
  }
  launch_elementwise(n, stream, [=] __device__(int64_t i) {
    const Offsets<2> at = offsets_of(args, i);
    d[at.at[0]] = s[at.at[1]];
  });
}

void copy_sized(void* dst, const void* src, size_t element_size, const StridedArgs<2>& args, int64_t n,
                Stream stream) {
  if (n == 0) return;
  const bool contiguous = args.rank == 0 || (args.rank == 1 && args.strides[0][0] == 1 && args.strides[1][0] == 1);
  if (contiguous) return copy_device_to_device(dst, src, static_cast<size_t>(n) * element_size, stream);
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
