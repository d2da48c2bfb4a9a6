// SwiGLU on the GPU; see swiglu.h. The forward is one map_rows
// (elementwise.cuh: 16-byte loads where aligned). The backward writes two
// outputs from three inputs, which map_rows does not take: a grid-stride
// loop, a thread an element, each element read before dgate (which may be
// dout) is written.
#include "kernels/cuda/swiglu.h"

#include <cmath>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/unary_math.h"

namespace remat::kernels::cuda {
namespace {

// The device functions of Silu: CUDA's (unary.cu's DeviceFns).
struct DeviceFns {
  __device__ static float exp(float v) { return expf(v); }
  __device__ static double exp(double v) { return ::exp(v); }
};

// dgate = silu'(g) (dy u), dup = dy silu(g); either may be null.
template <class T>
__global__ void backward_kernel(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n) {
  REMAT_GRID_STRIDE(i, n) {
    const T dy = dout[i], g = gate[i];
    const T dg = Silu::backward<T, DeviceFns>(dy * up[i], g);
    if (dup) dup[i] = dy * Silu::forward<T, DeviceFns>(g);
    if (dgate) dgate[i] = dg;
  }
}

}  // namespace

template <class T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n, Stream stream) {
  map_rows("swiglu_forward", dense_out(out), 1, n, stream,
           [] __device__(T g, T u) -> T { return Silu::forward<T, DeviceFns>(g) * u; }, dense(gate), dense(up));
}

template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n, Stream stream) {
  if (n == 0 || (!dgate && !dup)) return;
  launch("swiglu_backward", backward_kernel<T>, {blocks_for(n), kThreads}, stream, dgate, dup, dout, gate, up, n);
}

template void swiglu_forward<float>(float*, const float*, const float*, int64_t, Stream);
template void swiglu_forward<double>(double*, const double*, const double*, int64_t, Stream);
template void swiglu_backward<float>(float*, float*, const float*, const float*, const float*, int64_t, Stream);
template void swiglu_backward<double>(double*, double*, const double*, const double*, const double*, int64_t, Stream);

}  // namespace remat::kernels::cuda
