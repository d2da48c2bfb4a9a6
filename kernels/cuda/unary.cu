// The unary CUDA kernels; see unary.h. One grid-stride loop each
// (launch.cuh); GELU's math is kernels/math.h's, as on the CPU.
#include "kernels/cuda/unary.h"

#include "kernels/cuda/launch.cuh"
#include "kernels/math.h"

namespace remat::kernels::cuda {
namespace {

struct DeviceExp {
  __device__ float operator()(float v) const { return expf(v); }
  __device__ double operator()(double v) const { return exp(v); }
};

}  // namespace

template <class T> void neg_forward(T* out, const T* x, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) { out[i] = -x[i]; });
}
template <class T> void relu_forward(T* out, const T* x, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) { out[i] = x[i] > T(0) ? x[i] : T(0); });
}
template <class T> void relu_backward(T* dx, const T* dout, const T* out, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) { dx[i] = out[i] > T(0) ? dout[i] : T(0); });
}
template <class T> void tanh_forward(T* out, const T* x, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) { out[i] = tanh(x[i]); });
}
template <class T> void tanh_backward(T* dx, const T* dout, const T* out, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) { dx[i] = dout[i] * (T(1) - out[i] * out[i]); });
}
template <class T> void sigmoid_forward(T* out, const T* x, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) { out[i] = T(1) / (T(1) + DeviceExp{}(-x[i])); });
}
template <class T> void sigmoid_backward(T* dx, const T* dout, const T* out, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) { dx[i] = dout[i] * out[i] * (T(1) - out[i]); });
}
template <class T> void exp_forward(T* out, const T* x, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) { out[i] = DeviceExp{}(x[i]); });
}
template <class T> void exp_backward(T* dx, const T* dout, const T* out, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) { dx[i] = dout[i] * out[i]; });
}
template <class T> void log_forward(T* out, const T* x, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) { out[i] = log(x[i]); });
}
template <class T> void log_backward(T* dx, const T* dout, const T* x, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) { dx[i] = dout[i] / x[i]; });
}
template <class T> void gelu_forward(T* out, const T* x, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) { out[i] = gelu_of<T>(x[i], DeviceExp{}); });
}
template <class T> void gelu_backward(T* dx, const T* dout, const T* x, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) { dx[i] = gelu_grad_of<T>(dout[i], x[i], DeviceExp{}); });
}
template <class T> void scale(T* out, const T* x, T factor, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) { out[i] = x[i] * factor; });
}
template <class T> void fill(T* out, T value, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) { out[i] = value; });
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
