// Unary kernels: one loop each, split across threads above kParallelGrain
// elements; the compiler vectorises most of them, and GELU's, whose exp and
// division are long dependency chains, runs four vectors at a time by hand.
#include "kernels/cpu/unary.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/parallel.h"
#include "kernels/math.h"

namespace remat::kernels::cpu {
namespace {

// Runs run(begin, end) over [0, n): once for small n or one thread, else
// in chunks of kParallelGrain spread over the threads.
template <class Run>
inline void in_chunks(int64_t n, Run run) {
  if (n < 2 * kParallelGrain || num_threads() == 1) return run(0, n);
  const int64_t chunks = (n + kParallelGrain - 1) / kParallelGrain;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) run(c * kParallelGrain, std::min(n, (c + 1) * kParallelGrain));
}

// Runs body(i) for i in [0, n) as a plain vector loop. Each chunk calls a
// copy of body of its own: through the shared one, GCC reloaded the
// captured pointers after every store (they might have been overwritten)
// and left the loop scalar, with a branch per element (relu_backward ran
// at 3 ns an element).
template <class Body>
inline void elementwise(int64_t n, Body body) {
  in_chunks(n, [&body](int64_t begin, int64_t end) {
    const Body local = body;
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) local(i);
  });
}

// A whole Float32x8 (or float) from or to unaligned memory.
template <class F> F load(const float* p) {
  F v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class F> void store(float* p, F v) { std::memcpy(p, &v, sizeof v); }

// out[i] = fn(in[i]...) for i in [0, n), fn written once over the lane type.
// float runs four Float32x8 vectors per step, each a separate dependency
// chain: a long chain (an exp, then a division) leaves the vectoriser's one
// vector at a time waiting on latency; four overlap (GELU: 35-45% faster
// in cache, 20% streaming from memory). The last elements go through one
// zero-padded vector, so every element gets the same bits wherever it sits
// (a scalar tail would not: the compiler folds a clamped constant without
// the FMA the vector uses). double goes one element at a time.
template <class T, class Fn, class... In>
inline void map_lanes(T* out, int64_t n, Fn fn, const In*... in) {
  in_chunks(n, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, float>) {
      constexpr int64_t kLanes = 8;
      int64_t i = begin;
      for (; i + 4 * kLanes <= end; i += 4 * kLanes) {
        const Float32x8 y0 = fn(load<Float32x8>(in + i)...);
        const Float32x8 y1 = fn(load<Float32x8>(in + i + kLanes)...);
        const Float32x8 y2 = fn(load<Float32x8>(in + i + 2 * kLanes)...);
        const Float32x8 y3 = fn(load<Float32x8>(in + i + 3 * kLanes)...);
        store(out + i, y0);
        store(out + i + kLanes, y1);
        store(out + i + 2 * kLanes, y2);
        store(out + i + 3 * kLanes, y3);
      }
      for (; i < end; i += kLanes) {
        const size_t bytes = static_cast<size_t>(std::min(kLanes, end - i)) * sizeof(float);
        const auto padded = [&](const float* p) {
          Float32x8 v{};
          std::memcpy(&v, p + i, bytes);
          return v;
        };
        const Float32x8 y = fn(padded(in)...);
        std::memcpy(out + i, &y, bytes);
      }
    } else {
      for (int64_t i = begin; i < end; ++i) out[i] = fn(in[i]...);
    }
  });
}

}  // namespace

template <class T> void neg_forward(T* out, const T* x, int64_t n, Host) {
  elementwise(n, [=](int64_t i) { out[i] = -x[i]; });
}
template <class T> void relu_forward(T* out, const T* x, int64_t n, Host) {
  elementwise(n, [=](int64_t i) { out[i] = x[i] > T(0) ? x[i] : T(0); });
}
template <class T> void relu_backward(T* dx, const T* dout, const T* out, int64_t n, Host) {
  elementwise(n, [=](int64_t i) { dx[i] = out[i] > T(0) ? dout[i] : T(0); });
}
template <class T> void tanh_forward(T* out, const T* x, int64_t n, Host) {
  elementwise(n, [=](int64_t i) { out[i] = fast_tanh(x[i]); });
}
template <class T> void tanh_backward(T* dx, const T* dout, const T* out, int64_t n, Host) {
  elementwise(n, [=](int64_t i) { dx[i] = dout[i] * (T(1) - out[i] * out[i]); });
}
template <class T> void sigmoid_forward(T* out, const T* x, int64_t n, Host) {
  elementwise(n, [=](int64_t i) { out[i] = T(1) / (T(1) + fast_exp(-x[i])); });
}
template <class T> void sigmoid_backward(T* dx, const T* dout, const T* out, int64_t n, Host) {
  elementwise(n, [=](int64_t i) { dx[i] = dout[i] * out[i] * (T(1) - out[i]); });
}
template <class T> void exp_forward(T* out, const T* x, int64_t n, Host) {
  elementwise(n, [=](int64_t i) { out[i] = fast_exp(x[i]); });
}
template <class T> void exp_backward(T* dx, const T* dout, const T* out, int64_t n, Host) {
  elementwise(n, [=](int64_t i) { dx[i] = dout[i] * out[i]; });
}
template <class T> void log_forward(T* out, const T* x, int64_t n, Host) {
  elementwise(n, [=](int64_t i) { out[i] = std::log(x[i]); });
}
template <class T> void log_backward(T* dx, const T* dout, const T* x, int64_t n, Host) {
  elementwise(n, [=](int64_t i) { dx[i] = dout[i] / x[i]; });
}
// GELU's math is kernels/math.h's, with this file's exp (clamped_exp: the
// float polynomial of fast_math.h, or std::exp for double) for every lane.
struct ClampedExp {
  template <class V> V operator()(V v) const { return clamped_exp(v); }
};

template <class T> void gelu_forward(T* out, const T* x, int64_t n, Host) {
  map_lanes(out, n, [](auto v) { return gelu_of<T>(v, ClampedExp{}); }, x);
}
template <class T> void gelu_backward(T* dx, const T* dout, const T* x, int64_t n, Host) {
  map_lanes(dx, n, [](auto g, auto v) { return gelu_grad_of<T>(g, v, ClampedExp{}); }, dout, x);
}
template <class T> void scale(T* out, const T* x, T factor, int64_t n, Host) {
  elementwise(n, [=](int64_t i) { out[i] = x[i] * factor; });
}
template <class T> void fill(T* out, T value, int64_t n, Host) {
  elementwise(n, [=](int64_t i) { out[i] = value; });
}

#define REMAT_INSTANTIATE_UNARY(T)                                        \
  template void neg_forward<T>(T*, const T*, int64_t, Host);                    \
  template void relu_forward<T>(T*, const T*, int64_t, Host);                   \
  template void relu_backward<T>(T*, const T*, const T*, int64_t, Host);        \
  template void tanh_forward<T>(T*, const T*, int64_t, Host);                   \
  template void tanh_backward<T>(T*, const T*, const T*, int64_t, Host);        \
  template void sigmoid_forward<T>(T*, const T*, int64_t, Host);                \
  template void sigmoid_backward<T>(T*, const T*, const T*, int64_t, Host);     \
  template void exp_forward<T>(T*, const T*, int64_t, Host);                    \
  template void exp_backward<T>(T*, const T*, const T*, int64_t, Host);         \
  template void log_forward<T>(T*, const T*, int64_t, Host);                    \
  template void log_backward<T>(T*, const T*, const T*, int64_t, Host);         \
  template void gelu_forward<T>(T*, const T*, int64_t, Host);                   \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t, Host);        \
  template void scale<T>(T*, const T*, T, int64_t, Host);                       \
  template void fill<T>(T*, T, int64_t, Host);
REMAT_INSTANTIATE_UNARY(float)
REMAT_INSTANTIATE_UNARY(double)
template void fill<int64_t>(int64_t*, int64_t, int64_t, Host);
#undef REMAT_INSTANTIATE_UNARY

}  // namespace remat::kernels::cpu
