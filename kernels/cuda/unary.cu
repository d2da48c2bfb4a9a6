// The unary CUDA kernels; see unary.h. Every operand is dense: one map_rows
// each (elementwise.cuh), a row of n elements moved 16 bytes at a time
// where the pointers are aligned, no index arithmetic but i. One forward
// and one backward run every math of kernels/unary_math.h.
#include "kernels/cuda/unary.h"

#include <cmath>
#include <string>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/unary_math.h"

namespace remat::kernels::cuda {
namespace {

// The device functions of the maths: CUDA's.
struct DeviceFns {
  __device__ static float exp(float v) { return expf(v); }
  __device__ static double exp(double v) { return ::exp(v); }
  __device__ static float tanh(float v) { return tanhf(v); }
  __device__ static double tanh(double v) { return ::tanh(v); }
  __device__ static float log(float v) { return logf(v); }
  __device__ static double log(double v) { return ::log(v); }
};

// "<name>_forward" or "<name>_backward": the launch's name, made once.
template <class Math>
const char* launch_name(bool forward) {
  static const std::string names[2] = {std::string(Math::kName) + "_backward", std::string(Math::kName) + "_forward"};
  return names[forward ? 1 : 0].c_str();
}

}  // namespace

template <class Math, class T> void unary_forward(T* out, const T* x, int64_t n, Stream stream) {
  map_rows(launch_name<Math>(true), dense_out(out), 1, n, stream,
           [] __device__(T v) -> T { return Math::template forward<T, DeviceFns>(v); }, dense(x));
}
template <class Math, class T> void unary_backward(T* dx, const T* dout, const T* v, int64_t n, Stream stream) {
  if constexpr (Math::kReads == UnaryReads::Nothing) {
    map_rows(launch_name<Math>(false), dense_out(dx), 1, n, stream,
             [] __device__(T g) -> T { return Math::template backward<T, DeviceFns>(g); }, dense(dout));
  } else {
    map_rows(launch_name<Math>(false), dense_out(dx), 1, n, stream,
             [] __device__(T g, T s) -> T { return Math::template backward<T, DeviceFns>(g, s); }, dense(dout),
             dense(v));
  }
}
template <class T> void scale(T* out, const T* x, T factor, int64_t n, Stream stream) {
  map_rows("scale", dense_out(out), 1, n, stream, [factor] __device__(T v) -> T { return v * factor; }, dense(x));
}
template <class T> void fill(T* out, T value, int64_t n, Stream stream) {
  map_rows("fill", dense_out(out), 1, n, stream, [value] __device__() -> T { return value; });  // nothing read
}

#define REMAT_INSTANTIATE_MATH(Math)                                                                  \
  template void unary_forward<Math, float>(float*, const float*, int64_t, Stream);                    \
  template void unary_forward<Math, double>(double*, const double*, int64_t, Stream);                 \
  template void unary_backward<Math, float>(float*, const float*, const float*, int64_t, Stream);     \
  template void unary_backward<Math, double>(double*, const double*, const double*, int64_t, Stream);
REMAT_UNARY_MATHS(REMAT_INSTANTIATE_MATH)
#undef REMAT_INSTANTIATE_MATH
template void scale<float>(float*, const float*, float, int64_t, Stream);
template void scale<double>(double*, const double*, double, int64_t, Stream);
template void fill<float>(float*, float, int64_t, Stream);
template void fill<double>(double*, double, int64_t, Stream);
template void fill<int64_t>(int64_t*, int64_t, int64_t, Stream);

}  // namespace remat::kernels::cuda
