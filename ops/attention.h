// causal_softmax: the mask and softmax of causal attention as one op, over
// the (..., T, T) scores of q k^T (nn/gpt.cpp). It is
// softmax(masked_fill(x, causal_mask(T), -inf), -1), bit for bit on the CPU,
// without the (T, T) mask tensor and without a pass of its own for the mask.
#pragma once

#include "engine/tensor.h"

namespace remat {

// x (..., T, T) float32 or float64 -> (..., T, T): row i of each matrix is
// the softmax of its columns 0..i, and exactly 0 at columns j > i (the
// future, which the row never reads). Saves only its output, as softmax:
//   dx_ij = y_ij (dy_ij - sum_{k <= i} dy_ik y_ik) for j <= i, 0 for j > i.
Tensor causal_softmax(const Tensor& x);

}  // namespace remat
