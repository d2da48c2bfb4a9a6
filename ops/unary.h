// Unary elementwise ops. Each is an element math of kernels/unary_math.h
// (forward and derivative, written once for both devices) made an op by one
// line of ops/unary.cpp; unary_ops() lists them for the Python bindings and
// the tests.
#pragma once

#include <span>

#include "engine/tensor.h"
#include "kernels/unary_math.h"

namespace remat {

Tensor neg(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);  // 1 / (1 + e^-x)
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
// GELU, tanh approximation (GPT-2's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu(const Tensor& x);
// SiLU (swish): x sigmoid(x).
Tensor silu(const Tensor& x);

inline Tensor operator-(const Tensor& x) { return neg(x); }

// A unary op as the Python bindings (python/tensor.cpp) and the tests see
// it: its name (its node's and Python's), the function, and the inputs
// where it is defined and smooth.
struct UnaryOp {
  const char* name;
  Tensor (*fn)(const Tensor&);
  kernels::UnaryDomain domain;
};

// Every unary op above, in the order declared.
std::span<const UnaryOp> unary_ops();

}  // namespace remat
