// The element math of every unary op, written once for both devices: a
// small struct per op with its forward and its derivative, run by the one
// CPU kernel (kernels/cpu/unary.cpp) and the one CUDA kernel
// (kernels/cuda/unary.cu), each instantiated for every entry of
// REMAT_UNARY_MATHS at the end of this file. ops/unary.cpp makes each an op;
// the tests run every entry. Adding an op: CONTRIBUTING.md.
#pragma once

#include "kernels/math.h"

namespace remat::kernels {

// What a backward reads besides dout: the input, the output (whichever
// gives the cheaper derivative; the op saves that one), or nothing.
enum class UnaryReads { Nothing, Input, Output };

// Inputs where an op is defined and smooth: [low, high], and, with a kink
// at 0 (relu), without (-0.1, 0.1). Tests draw their values there.
struct UnaryDomain {
  double low, high;
  bool kink_at_zero = false;
};

// Each math is a struct of
//   kName     the op's name (its node's, its kernels' on the GPU, Python's)
//   kReads    what backward reads (above); kDomain (above)
//   kFlops    FLOPs an element of a forward, where not 1 (the op's OpTraits)
//   kLanes    true where the CPU's float path may run it on eight-float
//             lanes with clamped_exp, four vectors in flight (Note [CPU
//             lanes] in kernels/cpu/unary.cpp): for maths whose every exp
//             feeds a gate 1 / (1 + e^v)
//   forward<T, F>(x) and backward<T, F>(g, v): v the input or the output
//             as kReads says (backward<T, F>(g) where it reads nothing);
//             T the element type, V (deduced) T or, on the CPU's lanes
//             path, Float32x8, and F the device's functions: F::exp,
//             F::tanh, F::log (fast_math.h's on the CPU's float path,
//             the standard library's for double, CUDA's on the GPU).
// The derivative is written beside each backward as one line of math.

struct Neg {
  static constexpr const char* kName = "neg";
  static constexpr UnaryReads kReads = UnaryReads::Nothing;
  static constexpr UnaryDomain kDomain{-2, 2};
  template <class T, class F, class V> static REMAT_HOST_DEVICE V forward(V x) { return -x; }
  // d(-x)/dx = -1
  template <class T, class F, class V> static REMAT_HOST_DEVICE V backward(V g) { return -g; }
};

struct Relu {
  static constexpr const char* kName = "relu";
  static constexpr UnaryReads kReads = UnaryReads::Output;
  static constexpr UnaryDomain kDomain{-2, 2, true};
  template <class T, class F, class V> static REMAT_HOST_DEVICE V forward(V x) { return x > T(0) ? x : T(0); }
  // d relu(x)/dx = [x > 0] = [relu(x) > 0]
  template <class T, class F, class V> static REMAT_HOST_DEVICE V backward(V g, V y) { return y > T(0) ? g : T(0); }
};

struct Tanh {
  static constexpr const char* kName = "tanh";
  static constexpr UnaryReads kReads = UnaryReads::Output;
  static constexpr UnaryDomain kDomain{-2, 2};
  template <class T, class F, class V> static REMAT_HOST_DEVICE V forward(V x) { return F::tanh(x); }
  // d tanh(x)/dx = 1 - tanh(x)^2
  template <class T, class F, class V> static REMAT_HOST_DEVICE V backward(V g, V y) { return g * (T(1) - y * y); }
};

struct Sigmoid {
  static constexpr const char* kName = "sigmoid";
  static constexpr UnaryReads kReads = UnaryReads::Output;
  static constexpr UnaryDomain kDomain{-2, 2};
  // s(x) = 1 / (1 + e^-x)
  template <class T, class F, class V> static REMAT_HOST_DEVICE V forward(V x) { return T(1) / (T(1) + F::exp(-x)); }
  // d s(x)/dx = s(x) (1 - s(x))
  template <class T, class F, class V> static REMAT_HOST_DEVICE V backward(V g, V y) { return g * y * (T(1) - y); }
};

struct Exp {
  static constexpr const char* kName = "exp";
  static constexpr UnaryReads kReads = UnaryReads::Output;
  static constexpr UnaryDomain kDomain{-2, 2};
  template <class T, class F, class V> static REMAT_HOST_DEVICE V forward(V x) { return F::exp(x); }
  // d exp(x)/dx = exp(x)
  template <class T, class F, class V> static REMAT_HOST_DEVICE V backward(V g, V y) { return g * y; }
};

struct Log {
  static constexpr const char* kName = "log";
  static constexpr UnaryReads kReads = UnaryReads::Input;
  static constexpr UnaryDomain kDomain{0.5, 3};
  template <class T, class F, class V> static REMAT_HOST_DEVICE V forward(V x) { return F::log(x); }
  // d log(x)/dx = 1 / x
  template <class T, class F, class V> static REMAT_HOST_DEVICE V backward(V g, V x) { return g / x; }
};

// GELU, tanh form: gelu(x) = 0.5 x (1 + tanh u) = x sigmoid(2u) with
// u = sqrt(2/pi) (x + 0.044715 x^3): one exp and one division per element.
// The emulated cuBLASLt's GELU epilogue uses it too. `exp` is the device's
// (the CPU's float path: its vectorisable polynomial, kernels/cpu/fast_math.h);
// V is T or, on the CPU, eight float lanes.
inline constexpr double kGeluScale = 0.7978845608028654;
inline constexpr double kGeluCubic = 0.044715;

template <class T, class V, class Exp>
REMAT_HOST_DEVICE V gelu_gate(V v, Exp exp) {  // sigmoid(2u) = (1 + tanh u) / 2
  const T s = T(kGeluScale), c = T(kGeluCubic);
  return T(1) / (T(1) + exp(T(-2) * s * (v + c * v * v * v)));
}
template <class T, class V, class Exp>
REMAT_HOST_DEVICE V gelu_of(V v, Exp exp) {
  return v * gelu_gate<T>(v, exp);
}
// d gelu/dx = p + 2 x p (1 - p) du/dx, p = sigmoid(2u), du/dx = s (1 + 3 c x^2)
template <class T, class V, class Exp>
REMAT_HOST_DEVICE V gelu_grad_of(V g, V v, Exp exp) {
  const T s = T(kGeluScale), c = T(kGeluCubic);
  const V p = gelu_gate<T>(v, exp);
  const V du = s * (T(1) + T(3) * c * v * v);
  return g * (p + T(2) * v * p * (T(1) - p) * du);
}

// F::exp as the callable that gelu_of and gelu_grad_of take.
template <class F>
struct ExpOf {
  template <class V> REMAT_HOST_DEVICE V operator()(V v) const { return F::exp(v); }
};

// GELU, tanh approximation (GPT-2's): 0.5 x (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3),
// computed as x sigmoid(2u) (gelu_of above).
struct Gelu {
  static constexpr const char* kName = "gelu";
  static constexpr UnaryReads kReads = UnaryReads::Input;
  static constexpr UnaryDomain kDomain{-5, 5};
  static constexpr int kFlops = 10;  // the cubic, the tanh, the products: about ten an element
  static constexpr bool kLanes = true;
  template <class T, class F, class V> static REMAT_HOST_DEVICE V forward(V x) { return gelu_of<T>(x, ExpOf<F>{}); }
  // d gelu(x)/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
  template <class T, class F, class V> static REMAT_HOST_DEVICE V backward(V g, V x) {
    return gelu_grad_of<T>(g, x, ExpOf<F>{});
  }
};

// SiLU (swish): silu(x) = x s(x), s(x) = 1 / (1 + e^-x).
struct Silu {
  static constexpr const char* kName = "silu";
  static constexpr UnaryReads kReads = UnaryReads::Input;
  static constexpr UnaryDomain kDomain{-5, 5};
  static constexpr int kFlops = 4;  // the exp, the sum, the division, the product
  static constexpr bool kLanes = true;
  template <class T, class F, class V> static REMAT_HOST_DEVICE V forward(V x) {
    return x * (T(1) / (T(1) + F::exp(-x)));
  }
  // d silu(x)/dx = s(x) (1 + x (1 - s(x)))
  template <class T, class F, class V> static REMAT_HOST_DEVICE V backward(V g, V x) {
    const V s = T(1) / (T(1) + F::exp(-x));
    return g * s * (T(1) + x * (T(1) - s));
  }
};

// Every math above, in order: the CPU and CUDA kernels are instantiated for
// each (REMAT_UNARY_MATHS(X) expands X(Math) once per entry), and the
// kernel tests run each.
#define REMAT_UNARY_MATHS(X) X(Neg) X(Relu) X(Tanh) X(Sigmoid) X(Exp) X(Log) X(Gelu) X(Silu)

// FLOPs an element of Math's forward: Math::kFlops where given, else one.
template <class Math>
constexpr int64_t unary_flops() {
  if constexpr (requires { Math::kFlops; }) return Math::kFlops;
  else return 1;
}

// Whether the CPU's float path runs Math on lanes (Math::kLanes), else one element a step.
template <class Math>
constexpr bool unary_lanes() {
  if constexpr (requires { Math::kLanes; }) return Math::kLanes;
  else return false;
}

}  // namespace remat::kernels
