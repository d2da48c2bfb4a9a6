// Unary kernels: one loop each, vectorised by the compiler and split across
// threads above kParallelGrain elements.
#include "kernels/cpu/unary.h"

#include <cmath>

#include "kernels/cpu/parallel.h"

namespace remat::kernels::cpu {
namespace {

// Runs body(i) for i in [0, n), on every thread when n is large enough.
template <class Body>
inline void elementwise(int64_t n, Body body) {
#pragma omp parallel for simd schedule(static) if (n >= 2 * kParallelGrain)
  for (int64_t i = 0; i < n; ++i) body(i);
}

}  // namespace

template <class T> void neg_forward(T* out, const T* x, int64_t n) {
  elementwise(n, [=](int64_t i) { out[i] = -x[i]; });
}
template <class T> void relu_forward(T* out, const T* x, int64_t n) {
  elementwise(n, [=](int64_t i) { out[i] = x[i] > T(0) ? x[i] : T(0); });
}
template <class T> void relu_backward(T* dx, const T* dout, const T* out, int64_t n) {
  elementwise(n, [=](int64_t i) { dx[i] = out[i] > T(0) ? dout[i] : T(0); });
}
template <class T> void tanh_forward(T* out, const T* x, int64_t n) {
  elementwise(n, [=](int64_t i) { out[i] = std::tanh(x[i]); });
}
template <class T> void tanh_backward(T* dx, const T* dout, const T* out, int64_t n) {
  elementwise(n, [=](int64_t i) { dx[i] = dout[i] * (T(1) - out[i] * out[i]); });
}
template <class T> void sigmoid_forward(T* out, const T* x, int64_t n) {
  elementwise(n, [=](int64_t i) { out[i] = T(1) / (T(1) + std::exp(-x[i])); });
}
template <class T> void sigmoid_backward(T* dx, const T* dout, const T* out, int64_t n) {
  elementwise(n, [=](int64_t i) { dx[i] = dout[i] * out[i] * (T(1) - out[i]); });
}
template <class T> void exp_forward(T* out, const T* x, int64_t n) {
  elementwise(n, [=](int64_t i) { out[i] = std::exp(x[i]); });
}
template <class T> void exp_backward(T* dx, const T* dout, const T* out, int64_t n) {
  elementwise(n, [=](int64_t i) { dx[i] = dout[i] * out[i]; });
}
template <class T> void log_forward(T* out, const T* x, int64_t n) {
  elementwise(n, [=](int64_t i) { out[i] = std::log(x[i]); });
}
template <class T> void log_backward(T* dx, const T* dout, const T* x, int64_t n) {
  elementwise(n, [=](int64_t i) { dx[i] = dout[i] / x[i]; });
}
template <class T> void scale(T* out, const T* x, T factor, int64_t n) {
  elementwise(n, [=](int64_t i) { out[i] = x[i] * factor; });
}
template <class T> void fill(T* out, T value, int64_t n) {
  elementwise(n, [=](int64_t i) { out[i] = value; });
}

#define REMAT_INSTANTIATE_UNARY(T)                                        \
  template void neg_forward<T>(T*, const T*, int64_t);                    \
  template void relu_forward<T>(T*, const T*, int64_t);                   \
  template void relu_backward<T>(T*, const T*, const T*, int64_t);        \
  template void tanh_forward<T>(T*, const T*, int64_t);                   \
  template void tanh_backward<T>(T*, const T*, const T*, int64_t);        \
  template void sigmoid_forward<T>(T*, const T*, int64_t);                \
  template void sigmoid_backward<T>(T*, const T*, const T*, int64_t);     \
  template void exp_forward<T>(T*, const T*, int64_t);                    \
  template void exp_backward<T>(T*, const T*, const T*, int64_t);         \
  template void log_forward<T>(T*, const T*, int64_t);                    \
  template void log_backward<T>(T*, const T*, const T*, int64_t);         \
  template void scale<T>(T*, const T*, T, int64_t);                       \
  template void fill<T>(T*, T, int64_t);
REMAT_INSTANTIATE_UNARY(float)
REMAT_INSTANTIATE_UNARY(double)
template void fill<int64_t>(int64_t*, int64_t, int64_t);
#undef REMAT_INSTANTIATE_UNARY

}  // namespace remat::kernels::cpu
