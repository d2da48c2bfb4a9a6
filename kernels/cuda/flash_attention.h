// The CUDA twins of kernels/cpu/flash_attention.h: fused scaled-dot-product
// attention, flash-style (keys in tiles with an online softmax; the (Tq, Tk)
// probabilities never exist whole), the same names, arguments and math, the
// stream last. Called by ops/attention.cpp through kernels/flash_attention.h;
// how the work is split, and why every sum repeats bit for bit, is in the
// first comment of flash_attention.cu. Shapes: kernels/attention_dims.h.
#pragma once

#include <cstdint>

#include "kernels/attention_dims.h"
#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

// The largest head_dim (D) the kernels take; a larger one throws, naming it.
inline constexpr int64_t kFlashMaxHeadDim = 256;

// out (B, Hq, Tq, D) at out_layout = softmax(scale q k^T (+ causal mask)) v;
// lse (B, Hq, Tq), dense = log sum_j exp(scale q_i . k_j) over the keys row
// i sees (-inf, and out 0, for a row that sees none: Tk = 0). The bits of
// out and lse are the same on every run.
template <class T>
void flash_attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionDims& dims,
                             AttentionLayout q_layout, AttentionLayout k_layout, AttentionLayout v_layout,
                             AttentionLayout out_layout, Stream stream);

// With P = exp(scale q k^T - lse) (masked) and dP = dout v^T:
//   dv = P^T dout, dS = P * (dP - rowsum(dout * out)),
//   dq = scale dS k, dk = scale dS^T q,
// summed over the Hq / Hkv query heads of each key/value head in head
// order. dout and out are at out_layout. dq (B, Hq, Tq, D), dk and dv
// (B, Hkv, Tk, D) are at grad_layouts and written, never read. No
// atomics: the bits are the same on every run.
template <class T>
void flash_attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                              const T* lse, const AttentionDims& dims, AttentionLayout q_layout,
                              AttentionLayout k_layout, AttentionLayout v_layout, AttentionLayout out_layout,
                              AttentionGradLayouts grad_layouts, Stream stream);

}  // namespace remat::kernels::cuda
