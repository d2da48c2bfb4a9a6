// The unary CUDA kernels; see unary.h. Every operand is dense: one
// map_rows each (elementwise.cuh), a row of n elements moved 16 bytes at a
// time where the pointers are aligned, no index arithmetic but i; GELU's
// math is kernels/math.h's, as on the CPU.
#include "kernels/cuda/unary.h"

#include "kernels/cuda/elementwise.cuh"
#include "kernels/math.h"

namespace remat::kernels::cuda {
namespace {

struct DeviceExp {
  __device__ float operator()(float v) const { return expf(v); }
  __device__ double operator()(double v) const { return exp(v); }
};

// out (n) = f(x), out (n) = f(a, b): dense operands, one row.
template <class T, class F>
void map1(const char* name, T* out, const T* x, int64_t n, Stream stream, F f) {
  map_rows(name, dense_out(out), 1, n, stream, f, dense(x));
}
template <class T, class F>
void map2(const char* name, T* out, const T* a, const T* b, int64_t n, Stream stream, F f) {
  map_rows(name, dense_out(out), 1, n, stream, f, dense(a), dense(b));
}

}  // namespace

template <class T> void neg_forward(T* out, const T* x, int64_t n, Stream stream) {
  map1("neg_forward", out, x, n, stream, [] __device__(T v) -> T { return -v; });
}
template <class T> void relu_forward(T* out, const T* x, int64_t n, Stream stream) {
  map1("relu_forward", out, x, n, stream, [] __device__(T v) -> T { return v > T(0) ? v : T(0); });
}
// d relu(x)/dx = [out > 0]
template <class T> void relu_backward(T* dx, const T* dout, const T* out, int64_t n, Stream stream) {
  map2("relu_backward", dx, dout, out, n, stream, [] __device__(T g, T y) -> T { return y > T(0) ? g : T(0); });
}
template <class T> void tanh_forward(T* out, const T* x, int64_t n, Stream stream) {
  map1("tanh_forward", out, x, n, stream, [] __device__(T v) -> T { return tanh(v); });
}
// d tanh(x)/dx = 1 - out^2
template <class T> void tanh_backward(T* dx, const T* dout, const T* out, int64_t n, Stream stream) {
  map2("tanh_backward", dx, dout, out, n, stream, [] __device__(T g, T y) -> T { return g * (T(1) - y * y); });
}
template <class T> void sigmoid_forward(T* out, const T* x, int64_t n, Stream stream) {
  map1("sigmoid_forward", out, x, n, stream, [] __device__(T v) -> T { return T(1) / (T(1) + DeviceExp{}(-v)); });
}
// d sigmoid(x)/dx = out (1 - out)
template <class T> void sigmoid_backward(T* dx, const T* dout, const T* out, int64_t n, Stream stream) {
  map2("sigmoid_backward", dx, dout, out, n, stream, [] __device__(T g, T y) -> T { return g * y * (T(1) - y); });
}
template <class T> void exp_forward(T* out, const T* x, int64_t n, Stream stream) {
  map1("exp_forward", out, x, n, stream, [] __device__(T v) -> T { return DeviceExp{}(v); });
}
// d exp(x)/dx = out
template <class T> void exp_backward(T* dx, const T* dout, const T* out, int64_t n, Stream stream) {
  map2("exp_backward", dx, dout, out, n, stream, [] __device__(T g, T y) -> T { return g * y; });
}
template <class T> void log_forward(T* out, const T* x, int64_t n, Stream stream) {
  map1("log_forward", out, x, n, stream, [] __device__(T v) -> T { return log(v); });
}
// d log(x)/dx = 1 / x
template <class T> void log_backward(T* dx, const T* dout, const T* x, int64_t n, Stream stream) {
  map2("log_backward", dx, dout, x, n, stream, [] __device__(T g, T v) -> T { return g / v; });
}
template <class T> void gelu_forward(T* out, const T* x, int64_t n, Stream stream) {
  map1("gelu_forward", out, x, n, stream, [] __device__(T v) -> T { return gelu_of<T>(v, DeviceExp{}); });
}
template <class T> void gelu_backward(T* dx, const T* dout, const T* x, int64_t n, Stream stream) {
  map2("gelu_backward", dx, dout, x, n, stream,
       [] __device__(T g, T v) -> T { return gelu_grad_of<T>(g, v, DeviceExp{}); });
}
template <class T> void scale(T* out, const T* x, T factor, int64_t n, Stream stream) {
  map1("scale", out, x, n, stream, [factor] __device__(T v) -> T { return v * factor; });
}
template <class T> void fill(T* out, T value, int64_t n, Stream stream) {
  map_rows("fill", dense_out(out), 1, n, stream, [value] __device__() -> T { return value; });  // nothing read
}

#define REMAT_INSTANTIATE_UNARY(T)                                            \
  template void neg_forward<T>(T*, const T*, int64_t, Stream);                \
  template void relu_forward<T>(T*, const T*, int64_t, Stream);               \
  template void relu_backward<T>(T*, const T*, const T*, int64_t, Stream);    \
  template void tanh_forward<T>(T*, const T*, int64_t, Stream);               \
  template void tanh_backward<T>(T*, const T*, const T*, int64_t, Stream);    \
  template void sigmoid_forward<T>(T*, const T*, int64_t, Stream);            \
  template void sigmoid_backward<T>(T*, const T*, const T*, int64_t, Stream); \
  template void exp_forward<T>(T*, const T*, int64_t, Stream);                \
  template void exp_backward<T>(T*, const T*, const T*, int64_t, Stream);     \
  template void log_forward<T>(T*, const T*, int64_t, Stream);                \
  template void log_backward<T>(T*, const T*, const T*, int64_t, Stream);     \
  template void gelu_forward<T>(T*, const T*, int64_t, Stream);               \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t, Stream);    \
  template void scale<T>(T*, const T*, T, int64_t, Stream);                   \
  template void fill<T>(T*, T, int64_t, Stream);
REMAT_INSTANTIATE_UNARY(float)
REMAT_INSTANTIATE_UNARY(double)
template void fill<int64_t>(int64_t*, int64_t, int64_t, Stream);
#undef REMAT_INSTANTIATE_UNARY

}  // namespace remat::kernels::cuda
