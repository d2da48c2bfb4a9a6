// Embedding kernels: a gather of table rows by int64 ids, and its backward, a
// scatter-add of gradient rows into the table. Dense arrays only; the op in
// ops/embedding.cpp checks shapes and dtypes.
#pragma once

#include <cstdint>

#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

// out (n, C) = weight (V, C) [ids (n)]. Returns the position of the first id
// outside [0, V), or -1 when every id is valid (out is then complete).
template <class T>
int64_t embedding_forward(T* out, const T* weight, const int64_t* ids, int64_t n, int64_t channels, int64_t vocab, Host = {});

// dweight (V, C) = 0, then dweight[ids[i]] += dout[i] for i in [0, n), in
// order of i, so repeated ids accumulate and the sum is deterministic.
// Returns the position of the first id outside [0, V), or -1 when every id
// is valid (dweight is then complete; else it is not written): the ids are
// checked again, since they may have changed since forward checked them.
template <class T>
int64_t embedding_backward(T* dweight, const T* dout, const int64_t* ids, int64_t n, int64_t channels, int64_t vocab,
                           Host = {});

}  // namespace remat::kernels::cpu
