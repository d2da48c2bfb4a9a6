// masked_fill and the causal mask on the GPU; see mask.h. masked_fill whose
// strides merge into two axes (the causal mask broadcast over batch and
// heads is (B * H, T * T), the mask stepping (0, 1)) goes through map_rows
// (elementwise.cuh: no index division, 16-byte loads where aligned); other
// shapes one thread an element through offsets_of. out may be x itself
// (backward writing over its gradient).
#include "kernels/cuda/mask.h"

#include "kernels/cuda/elementwise.cuh"

namespace remat::kernels::cuda {

template <class T, class M>
void masked_fill_forward(T* out, const T* x, const std::vector<int64_t>& x_strides, const M* mask,
                         const std::vector<int64_t>& mask_strides, const std::vector<int64_t>& shape, T value,
                         Stream stream) {
  const StridedArgs<2> args = strided_args<2>(shape, {&x_strides, &mask_strides});
  const auto f = [value] __device__(T v, M m) -> T { return m != M(0) ? value : v; };
  if (const MapShape s = map_shape(args); s.fits) {
    map_rows("masked_fill_forward", Dst<T>{out, s.cols, 1}, s.rows, s.cols, stream, f, Src<T>{x, s.row[0], s.col[0]},
             Src<M>{mask, s.row[1], s.col[1]});
    return;
  }
  launch_elementwise(numel_of(shape), stream, [=] __device__(int64_t i) {
    const Offsets<2> at = offsets_of(args, i);
    out[i] = mask[at.at[1]] != M(0) ? value : x[at.at[0]];
  });
}

void causal_mask_forward(int64_t* mask, int64_t t, Stream stream) {
  launch_elementwise(t * t, stream, [=] __device__(int64_t i) { mask[i] = i % t > i / t ? 1 : 0; });
}

#define REMAT_INSTANTIATE_MASK(T, M)                                                                       \
  template void masked_fill_forward<T, M>(T*, const T*, const std::vector<int64_t>&, const M*,            \
                                          const std::vector<int64_t>&, const std::vector<int64_t>&, T, Stream);
REMAT_INSTANTIATE_MASK(float, int64_t)
REMAT_INSTANTIATE_MASK(float, float)
REMAT_INSTANTIATE_MASK(double, int64_t)
REMAT_INSTANTIATE_MASK(double, double)
#undef REMAT_INSTANTIATE_MASK

}  // namespace remat::kernels::cuda
