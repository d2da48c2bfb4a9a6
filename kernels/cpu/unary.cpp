// The unary kernels: one loop for every math of kernels/unary_math.h,
// split across threads in the chunks of in_chunks (parallel.h); the compiler
// vectorises it, or, for a math that asks, it runs four vectors at a time
// by hand (Note [CPU lanes]).
#include "kernels/cpu/unary.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/parallel.h"
#include "kernels/unary_math.h"

namespace remat::kernels::cpu {
namespace {

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

// The device functions of the maths (kernels/unary_math.h) on the CPU.
// One element a step: fast_math.h's exp and tanh for float (plain
// arithmetic, so the loop vectorises), the standard library's for double.
struct ElementFns {
  template <class T> static T exp(T v) { return fast_exp(v); }
  template <class T> static T tanh(T v) { return fast_tanh(v); }
  template <class T> static T log(T v) { return std::log(v); }
};
// On lanes: clamped_exp, the float polynomial over eight lanes (std::exp
// for double), and nothing else (Note [CPU lanes]).
struct LaneFns {
  template <class V> static V exp(V v) { return clamped_exp(v); }
};

}  // namespace

// Note [CPU lanes]
// A math runs one element a step in a loop that the compiler vectorises,
// unless it sets kLanes: then its float path goes through map_lanes (four
// Float32x8 vectors in flight, a zero-padded last vector) with clamped_exp,
// whose clamp a gate 1 / (1 + e^v) never sees. GELU's exp and division are
// long dependency chains that the vectoriser's one vector at a time leaves
// waiting (35-45% faster on lanes). Sigmoid, a gate too, keeps the element
// loop and fast_exp: from -88.72 to -88.37 its results are subnormals
// that clamped_exp would make 0, and its bits are older than the lanes.
template <class Math, class T> void unary_forward(T* out, const T* x, int64_t n, Host) {
  if constexpr (unary_lanes<Math>()) {
    map_lanes(out, n, [](auto v) { return Math::template forward<T, LaneFns>(v); }, x);
  } else {
    elementwise(n, [=](int64_t i) { out[i] = Math::template forward<T, ElementFns>(x[i]); });
  }
}
template <class Math, class T> void unary_backward(T* dx, const T* dout, const T* v, int64_t n, Host) {
  if constexpr (Math::kReads == UnaryReads::Nothing) {
    elementwise(n, [=](int64_t i) { dx[i] = Math::template backward<T, ElementFns>(dout[i]); });
  } else if constexpr (unary_lanes<Math>()) {
    map_lanes(dx, n, [](auto g, auto s) { return Math::template backward<T, LaneFns>(g, s); }, dout, v);
  } else {
    elementwise(n, [=](int64_t i) { dx[i] = Math::template backward<T, ElementFns>(dout[i], v[i]); });
  }
}
template <class T> void scale(T* out, const T* x, T factor, int64_t n, Host) {
  elementwise(n, [=](int64_t i) { out[i] = x[i] * factor; });
}
template <class T> void fill(T* out, T value, int64_t n, Host) {
  elementwise(n, [=](int64_t i) { out[i] = value; });
}

#define REMAT_INSTANTIATE_MATH(Math)                                                                \
  template void unary_forward<Math, float>(float*, const float*, int64_t, Host);                    \
  template void unary_forward<Math, double>(double*, const double*, int64_t, Host);                 \
  template void unary_backward<Math, float>(float*, const float*, const float*, int64_t, Host);     \
  template void unary_backward<Math, double>(double*, const double*, const double*, int64_t, Host);
REMAT_UNARY_MATHS(REMAT_INSTANTIATE_MATH)
#undef REMAT_INSTANTIATE_MATH
template void scale<float>(float*, const float*, float, int64_t, Host);
template void scale<double>(double*, const double*, double, int64_t, Host);
template void fill<float>(float*, float, int64_t, Host);
template void fill<double>(double*, double, int64_t, Host);
template void fill<int64_t>(int64_t*, int64_t, int64_t, Host);

}  // namespace remat::kernels::cpu
