// The CUDA twins of kernels/cpu/embedding.h.
#pragma once

#include <cstdint>

#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

// out (n, C) = weight[ids] (weight (V, C)); the position of the first id
// outside [0, V), or -1 (then nothing is written). Waits for `stream`.
template <class T>
int64_t embedding_forward(T* out, const T* weight, const int64_t* ids, int64_t n, int64_t channels, int64_t vocab,
                          Stream stream);
// dweight (V, C) = for each v, the sum of dout[i] over i with ids[i] == v, in
// increasing i (the CPU's order, so the same bits), with no atomics: the ids
// are grouped by value on the host first. Returns the position of the first
// id outside [0, V), with dweight left unwritten (the ids may have changed
// since forward checked them), or -1. Waits for `stream` (the ids come to
// the host).
template <class T>
int64_t embedding_backward(T* dweight, const T* dout, const int64_t* ids, int64_t n, int64_t channels, int64_t vocab,
                           Stream stream);

}  // namespace remat::kernels::cuda
