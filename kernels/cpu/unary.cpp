// Unary kernels: one loop each, vectorised by the compiler and split across
// threads above kParallelGrain elements.
#include "kernels/cpu/unary.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/parallel.h"

namespace remat::kernels::cpu {
namespace {

// Runs body(i) for i in [0, n): a plain vector loop, split into chunks of
// kParallelGrain over the threads when n is large (no parallel region at
// all for small n or one thread).
template <class Body>
inline void elementwise(int64_t n, Body body) {
  auto run = [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) body(i);
  };
  if (n < 2 * kParallelGrain || num_threads() == 1) return run(0, n);
  const int64_t chunks = (n + kParallelGrain - 1) / kParallelGrain;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) run(c * kParallelGrain, std::min(n, (c + 1) * kParallelGrain));
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
  elementwise(n, [=](int64_t i) { out[i] = fast_tanh(x[i]); });
}
template <class T> void tanh_backward(T* dx, const T* dout, const T* out, int64_t n) {
  elementwise(n, [=](int64_t i) { dx[i] = dout[i] * (T(1) - out[i] * out[i]); });
}
template <class T> void sigmoid_forward(T* out, const T* x, int64_t n) {
  elementwise(n, [=](int64_t i) { out[i] = T(1) / (T(1) + fast_exp(-x[i])); });
}
template <class T> void sigmoid_backward(T* dx, const T* dout, const T* out, int64_t n) {
  elementwise(n, [=](int64_t i) { dx[i] = dout[i] * out[i] * (T(1) - out[i]); });
}
template <class T> void exp_forward(T* out, const T* x, int64_t n) {
  elementwise(n, [=](int64_t i) { out[i] = fast_exp(x[i]); });
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
// GELU's constants: sqrt(2/pi) and the cubic coefficient of its tanh approximation.
inline constexpr double kGeluScale = 0.7978845608028654;
inline constexpr double kGeluCubic = 0.044715;

// 0.5 x (1 + tanh u) with u = s (x + c x^3) is x * sigmoid(2u): one exp and
// one division per element instead of tanh's two branches.
template <class T> T gelu_gate(T v, T s, T c) { return T(1) / (T(1) + fast_exp(T(-2) * s * (v + c * v * v * v))); }

template <class T> void gelu_forward(T* out, const T* x, int64_t n) {
  const T s = T(kGeluScale), c = T(kGeluCubic);
  elementwise(n, [=](int64_t i) { out[i] = x[i] * gelu_gate(x[i], s, c); });
}
template <class T> void gelu_backward(T* dx, const T* dout, const T* x, int64_t n) {
  const T s = T(kGeluScale), c = T(kGeluCubic);
  elementwise(n, [=](int64_t i) {
    const T v = x[i];
    const T p = gelu_gate(v, s, c);               // sigmoid(2u) = (1 + tanh u) / 2
    const T du = s * (T(1) + T(3) * c * v * v);  // du/dx
    dx[i] = dout[i] * (p + T(2) * v * p * (T(1) - p) * du);
  });
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
  template void gelu_forward<T>(T*, const T*, int64_t);                   \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t);        \
  template void scale<T>(T*, const T*, T, int64_t);                       \
  template void fill<T>(T*, T, int64_t);
REMAT_INSTANTIATE_UNARY(float)
REMAT_INSTANTIATE_UNARY(double)
template void fill<int64_t>(int64_t*, int64_t, int64_t);
#undef REMAT_INSTANTIATE_UNARY

}  // namespace remat::kernels::cpu
