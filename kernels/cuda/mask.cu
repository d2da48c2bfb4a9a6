// masked_fill and the causal mask on the GPU; see mask.h. One thread an
// element; out may be x itself (backward writing over its gradient).
#include "kernels/cuda/mask.h"

#include "kernels/cuda/launch.cuh"

namespace remat::kernels::cuda {

template <class T, class M>
void masked_fill_forward(T* out, const T* x, const std::vector<int64_t>& x_strides, const M* mask,
                         const std::vector<int64_t>& mask_strides, const std::vector<int64_t>& shape, T value,
                         Stream stream) {
  const StridedArgs<2> args = strided_args<2>(shape, {&x_strides, &mask_strides});
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
