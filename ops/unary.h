// Unary elementwise ops: neg, relu, tanh, sigmoid, exp, log.
#pragma once

#include "engine/tensor.h"

namespace remat {

Tensor neg(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);

inline Tensor operator-(const Tensor& x) { return neg(x); }

}  // namespace remat
