// exp and tanh for float32 loops that the compiler can vectorise: plain
// arithmetic, no library calls (a call to std::expf or std::tanhf keeps a
// loop scalar; in W2 they took a quarter of the step). float64 goes to the
// standard library, so the float64 gradient checks test the math exactly.
//
// exp: Cephes' expf (range reduction e^x = 2^n e^r with ln 2 split in two
// parts, a degree-6 polynomial for e^r), with 2^n applied as two factors so
// that results near the overflow and underflow limits stay right. tanh:
// Cephes' tanhf (an odd polynomial below |x| = 0.625, 1 - 2 / (e^2|x| + 1)
// above). Both are within a few ulp of the exact values
// (tests/kernels/fast_math_test.cpp measures it). clamped_exp: the same
// polynomial with a cheaper range, for gates 1 / (1 + e^x), over float or
// eight float lanes at once (Float32x8, for loops written by hand).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace remat::kernels::cpu {

// Eight float lanes as one value (the GCC and Clang vector extension), for
// loops that keep several independent vectors in flight by hand.
using Float32x8 = float __attribute__((vector_size(32)));
using Int32x8 = int32_t __attribute__((vector_size(32)));
template <class F> struct LanesOf { using Int = int32_t; };
template <> struct LanesOf<Float32x8> { using Int = Int32x8; };

// Cephes' expf core, for x already clamped into [-104, 89]: n = round(x /
// ln 2) and e^r for r = x - n ln 2 (ln 2 in two parts, so r is exact), by
// a degree-6 polynomial. e^x = e^r 2^n; each caller applies 2^n as its
// range needs. For float or Float32x8.
template <class F> struct ExpParts {
  F er;
  typename LanesOf<F>::Int n;
};
template <class F> ExpParts<F> exp_parts(F clamped) {
  using I = typename LanesOf<F>::Int;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const F shifted = clamped * 1.44269504088896341f + kRound;
  const F n = shifted - kRound;
  const I ni = std::bit_cast<I>(shifted) - std::bit_cast<int32_t>(kRound);
  F r = clamped - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return {p * (r * r) + r + 1.0f, ni};
}

inline float fast_exp(float x) {
  // Vectorises only under -fno-trapping-math (set for kernels/ in CMake).
  // Below -104 (e^x under half the smallest subnormal) the result is 0, and
  // the lane computes e^0 meanwhile: clamping it to -104 instead made a
  // subnormal product, which costs a microcode assist per element; a causal
  // softmax sends half its elements here (e^-inf), and ran 2.5x slower.
  const float low = x < -104.0f ? 0.0f : x;  // written so that NaN passes through
  const float clamped = low > 89.0f ? 89.0f : low;
  const auto [er, ni] = exp_parts(clamped);
  // 2^n = 2^half * 2^(n - half): each factor is a normal float for n in [-150, 129].
  const int32_t half = ni / 2;
  const float scale_a = std::bit_cast<float>((half + 127) << 23);
  const float scale_b = std::bit_cast<float>((ni - half + 127) << 23);
  const float y = er * scale_a * scale_b;
  return x < -104.0f ? 0.0f : y;
}

inline float fast_tanh(float x) {
  const float a = std::abs(x);
  const float z = x * x;
  const float small =
      ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) * z -
       3.33332819422e-1f) * z * x + x;
  const float large = 1.0f - 2.0f / (fast_exp(2.0f * a) + 1.0f);
  return std::copysign(a < 0.625f ? small : large, x);  // copysign keeps tanh(-0) = -0
}

// e^x with x first clamped into [-87, 89], where 2^n is one factor:
// fast_exp's two scale factors and its blends for 0 and overflow go. It is
// fast_exp's value up to 88.37, +inf above (n reaches 128, and 2^128 is
// inf; e^x itself overflows at 88.72), e^-87 below -87; NaN passes through.
// A gate 1 / (1 + e^x) loses nothing: below -87 it rounds to exactly 1
// either way, above 88.37 it is 0 where exactly it is under 4e-39. A float call
// whose clamp the compiler folds may differ from a runtime one in the last
// bit (the fold skips the FMA), so GELU runs it on Float32x8 only.
template <class F> F clamped_exp(F x) {
  const F low = x < -87.0f ? F{} - 87.0f : x;
  const F clamped = low > 89.0f ? F{} + 89.0f : low;
  const auto [er, n] = exp_parts(clamped);
  return er * std::bit_cast<F>((n + 127) << 23);
}

inline double fast_exp(double x) { return std::exp(x); }
inline double clamped_exp(double x) { return std::exp(x); }
inline double fast_tanh(double x) { return std::tanh(x); }

}  // namespace remat::kernels::cpu
