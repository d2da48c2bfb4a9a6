// Dropout on the GPU; see dropout.h. One thread per group of four elements,
// one Philox draw each, as the CPU kernel groups them. Where x and out are
// 16-byte aligned, a whole group moves as one Pack (4 floats: one 16-byte
// load and store; 4 doubles: two), the same math on the same values
// (Note [Vector loads] in elementwise.cuh); the last partial group, and
// every group of unaligned views, one element at a time.
#include "kernels/cuda/dropout.h"

#include "kernels/cuda/elementwise.cuh"
#include "kernels/math.h"

namespace remat::kernels::cuda {
namespace {

// out[i] = keep(i) ? x[i] * scale : 0; forward and backward are this same map.
template <class T>
void apply_mask(T* out, const T* x, int64_t n, DropoutMask mask, T scale, Stream stream) {
  const int64_t groups = (n + 3) / 4;
  const bool vector = aligned_16(out) && aligned_16(x);
  launch_elementwise(groups, stream, [=] __device__(int64_t g) {
    const Words4 words = philox4x32(mask.seed, mask.offset + static_cast<uint64_t>(g));
    if (vector && 4 * g + 4 <= n) {
      const Pack<T, 4> in = *reinterpret_cast<const Pack<T, 4>*>(x + 4 * g);
      Pack<T, 4> result;
      for (int j = 0; j < 4; ++j) result.v[j] = dropout_keeps(words.w[j], mask.threshold) ? in.v[j] * scale : T(0);
      *reinterpret_cast<Pack<T, 4>*>(out + 4 * g) = result;
      return;
    }
    for (int64_t j = 0; j < 4 && 4 * g + j < n; ++j) {
      const int64_t i = 4 * g + j;
      out[i] = dropout_keeps(words.w[j], mask.threshold) ? x[i] * scale : T(0);
    }
  });
}

}  // namespace

template <class T> void dropout_forward(T* out, const T* x, int64_t n, const DropoutMask& mask, T scale, Stream stream) {
  apply_mask(out, x, n, mask, scale, stream);
}
template <class T> void dropout_backward(T* dx, const T* dout, int64_t n, const DropoutMask& mask, T scale, Stream stream) {
  apply_mask(dx, dout, n, mask, scale, stream);
}

template void dropout_forward<float>(float*, const float*, int64_t, const DropoutMask&, float, Stream);
template void dropout_forward<double>(double*, const double*, int64_t, const DropoutMask&, double, Stream);
template void dropout_backward<float>(float*, const float*, int64_t, const DropoutMask&, float, Stream);
template void dropout_backward<double>(double*, const double*, int64_t, const DropoutMask&, double, Stream);

}  // namespace remat::kernels::cuda
