// Layer normalisation kernels over the last axis of dense (rows, channels)
// arrays: a fused forward that also writes each row's mean and 1/std, and a
// fused backward that makes dx, dweight and dbias in one pass over the rows.
// Called by ops/layer_norm.cpp; knows nothing of tensors or autograd.
#pragma once

#include <cstdint>

#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

// out (rows, C) = (x - mean) * rstd * weight + bias, with mean (rows) and
// rstd (rows) = 1 / sqrt(biased var + eps) written too. weight and bias (C)
// may be null (then 1 and 0). Mean and variance come from a corrected
// two-pass over (x - first mean), so float32 rows with a large mean lose
// nothing to cancellation.
template <class T>
void layer_norm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, int64_t rows,
                        int64_t channels, double eps, Host = {});

// out (rows, C) = (x - mean) * rstd * weight + bias with a mean and rstd
// that layer_norm_forward wrote for this x: one pass instead of its three,
// and the same bits (a replay of the op normalises with the statistics it
// saved the first time).
template <class T>
void layer_norm_apply(T* out, const T* mean, const T* rstd, const T* x, const T* weight, const T* bias, int64_t rows,
                      int64_t channels, Host = {});

// The blocks of rows layer_norm_backward sums dweight and dbias over (1:
// straight into them), and the scratch elements it then needs when either
// is wanted: a partial sum of each per block, (blocks, 2, C), or 0 for one
// block. Blocks depend on rows and C alone, never on the thread count
// (Note [Row blocks fixed by the shape], kernels/cpu/row_block_sums.h).
int64_t layer_norm_backward_blocks(int64_t rows, int64_t channels);
int64_t layer_norm_backward_scratch(int64_t blocks, int64_t channels);

// With xhat = (x - mean) * rstd and g = dout * weight, per row:
//   dx = rstd * (g - mean_C(g) - xhat * mean_C(g * xhat))
//   dweight += dout * xhat,  dbias += dout     (block partials added in block order)
// dx, dweight, dbias may each be null (not wanted); weight may be null (1).
// scratch holds layer_norm_backward_scratch(blocks, C) elements (may be
// null when neither dweight nor dbias is wanted); blocks comes from
// layer_norm_backward_blocks(). Threads take whole blocks (rows for dx):
// bits do not depend on them.
template <class T>
void layer_norm_backward(T* dx, T* dweight, T* dbias, T* scratch, const T* dout, const T* x, const T* weight,
                         const T* mean, const T* rstd, int64_t rows, int64_t channels, int64_t blocks, Host = {});

}  // namespace remat::kernels::cpu
