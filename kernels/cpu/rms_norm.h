// RMS normalisation kernels over the last axis of dense (rows, channels)
// arrays (Llama's RMSNorm): a fused forward that also writes each row's
// 1/rms, an apply that reuses it (a replay), and a fused backward that makes
// dx and dweight in one pass over the rows. Called by ops/rms_norm.cpp;
// knows nothing of tensors or autograd. Twin: kernels/cuda/rms_norm.h.
#pragma once

#include <cstdint>

#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

// out (rows, C) = x * rstd * weight, with rstd (rows) = 1 / sqrt(mean_C(x^2)
// + eps) written too; weight (C) may be null (then 1). The mean of squares
// is summed in T and divided in double.
template <class T>
void rms_norm_forward(T* out, T* rstd, const T* x, const T* weight, int64_t rows, int64_t channels, double eps,
                      Host = {});

// out (rows, C) = x * rstd * weight with the rstd that rms_norm_forward
// wrote for this x: the same bits, without the sum of squares (a replay).
template <class T>
void rms_norm_apply(T* out, const T* rstd, const T* x, const T* weight, int64_t rows, int64_t channels, Host = {});

// The blocks of rows rms_norm_backward sums dweight over (1: straight into
// dweight), and the scratch elements it then needs when dweight is wanted:
// a partial sum per block, (blocks, C), or 0 for one block. Blocks depend
// on rows and C alone, never on the thread count, so dweight's bits do not
// (Note [Row blocks fixed by the shape], kernels/cpu/row_block_sums.h).
int64_t rms_norm_backward_blocks(int64_t rows, int64_t channels);
int64_t rms_norm_backward_scratch(int64_t blocks, int64_t channels);

// With xhat = x * rstd and g = dout * weight, per row:
//   dx = rstd * (g - xhat * mean_C(g * xhat))
//   dweight = sum over rows of dout * xhat     (block partials added in block order)
// dx and dweight may each be null (not wanted); weight may be null (1).
// scratch holds rms_norm_backward_scratch(blocks, C) elements (null when
// dweight is not wanted); blocks comes from rms_norm_backward_blocks().
// Threads take whole blocks (rows for dx): bits do not depend on them.
template <class T>
void rms_norm_backward(T* dx, T* dweight, T* scratch, const T* dout, const T* x, const T* weight, const T* rstd,
                       int64_t rows, int64_t channels, int64_t blocks, Host = {});

}  // namespace remat::kernels::cpu
