// softmax, log_softmax over one axis, and cross_entropy of logits against
// int64 class targets, fused (log-softmax and NLL in one pass).
#pragma once

#include "engine/tensor.h"

namespace remat {

Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor log_softmax(const Tensor& x, int64_t axis = -1);

// logits (N, C), targets (N) int64 -> scalar: the mean over rows whose
// target is not ignore_index of -log softmax(logits)[target]. All rows
// ignored gives NaN, as in PyTorch. Logits (..., C) with targets (...) are
// flattened to (N, C) and (N) (a language model's (B, T, V) and (B, T)).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);

// The same loss composed of log_softmax, a one-hot mask, mul and sum: the
// unfused reference that tests hold the fused op to.
Tensor cross_entropy_reference(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);

}  // namespace remat
