// Unary elementwise ops: neg, relu, tanh, sigmoid, exp, log, gelu.
#pragma once

#include "engine/tensor.h"

namespace remat {

Tensor neg(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
// GELU, tanh approximation (GPT-2's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu(const Tensor& x);

inline Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace remat
