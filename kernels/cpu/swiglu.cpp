// SwiGLU kernels; see swiglu.h. Elementwise, so split over threads in the
// chunks of in_chunks (parallel.h), kParallelGrain elements, a multiple of
// kLanes: bits independent of the threads. float runs on Float32x8 lanes
// with clamped_exp, four vectors in flight and one zero-padded vector for
// the last elements, exactly as unary.cpp runs silu (Note [CPU lanes]):
// each element's silu is the same code on the same value wherever it sits,
// so it has silu's bits. double runs one element a step with std::exp.
#include "kernels/cpu/swiglu.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/parallel.h"
#include "kernels/unary_math.h"

namespace remat::kernels::cpu {
namespace {

constexpr int64_t kLanes = 8;  // floats in a Float32x8

// unary.cpp's device functions for Silu: clamped_exp on lanes, and the
// standard library's exp for double (fast_exp(double) is std::exp).
struct LaneFns {
  template <class V> static V exp(V v) { return clamped_exp(v); }
};
struct ElementFns {
  template <class T> static T exp(T v) { return fast_exp(v); }
};

// Eight floats from p (count of them, the rest 0), and back.
Float32x8 load(const float* p, int64_t count = kLanes) {
  Float32x8 v{};
  std::memcpy(&v, p, static_cast<size_t>(count) * sizeof(float));
  return v;
}
void store(float* p, Float32x8 v, int64_t count = kLanes) {
  std::memcpy(p, &v, static_cast<size_t>(count) * sizeof(float));
}

// The lane math: silu(g) * u; and (dgate, dup).
Float32x8 forward_lanes(Float32x8 g, Float32x8 u) { return Silu::forward<float, LaneFns>(g) * u; }
struct Grads {
  Float32x8 dgate, dup;
};
Grads backward_lanes(Float32x8 dy, Float32x8 g, Float32x8 u) {
  return {Silu::backward<float, LaneFns>(dy * u, g), dy * Silu::forward<float, LaneFns>(g)};
}

void forward_floats(float* out, const float* gate, const float* up, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 4 * kLanes <= end; i += 4 * kLanes) {
    Float32x8 y[4];
    for (int k = 0; k < 4; ++k) y[k] = forward_lanes(load(gate + i + k * kLanes), load(up + i + k * kLanes));
    for (int k = 0; k < 4; ++k) store(out + i + k * kLanes, y[k]);
  }
  for (; i < end; i += kLanes) {
    const int64_t count = std::min(kLanes, end - i);
    store(out + i, forward_lanes(load(gate + i, count), load(up + i, count)), count);
  }
}

void backward_floats(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int64_t begin,
                     int64_t end) {
  const auto put = [&](int64_t at, const Grads& d, int64_t count) {
    if (dgate) store(dgate + at, d.dgate, count);
    if (dup) store(dup + at, d.dup, count);
  };
  int64_t i = begin;
  for (; i + 4 * kLanes <= end; i += 4 * kLanes) {
    Grads d[4];  // every input of the step is read before dgate (maybe dout) is written
    for (int k = 0; k < 4; ++k) {
      const int64_t at = i + k * kLanes;
      d[k] = backward_lanes(load(dout + at), load(gate + at), load(up + at));
    }
    for (int k = 0; k < 4; ++k) put(i + k * kLanes, d[k], kLanes);
  }
  for (; i < end; i += kLanes) {
    const int64_t count = std::min(kLanes, end - i);
    put(i, backward_lanes(load(dout + i, count), load(gate + i, count), load(up + i, count)), count);
  }
}

}  // namespace

template <class T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n, Host) {
  in_chunks(n, [=](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, float>) {
      forward_floats(out, gate, up, begin, end);
    } else {
      for (int64_t i = begin; i < end; ++i) out[i] = Silu::forward<T, ElementFns>(gate[i]) * up[i];
    }
  });
}

template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n, Host) {
  in_chunks(n, [=](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, float>) {
      backward_floats(dgate, dup, dout, gate, up, begin, end);
    } else {
      for (int64_t i = begin; i < end; ++i) {
        const T dy = dout[i], g = gate[i];
        if (dup) dup[i] = dy * Silu::forward<T, ElementFns>(g);
        if (dgate) dgate[i] = Silu::backward<T, ElementFns>(dy * up[i], g);
      }
    }
  });
}

template void swiglu_forward<float>(float*, const float*, const float*, int64_t, Host);
template void swiglu_forward<double>(double*, const double*, const double*, int64_t, Host);
template void swiglu_backward<float>(float*, float*, const float*, const float*, const float*, int64_t, Host);
template void swiglu_backward<double>(double*, double*, const double*, const double*, const double*, int64_t, Host);

}  // namespace remat::kernels::cpu
