// Fused scaled-dot-product attention on the CPU, flash-style: keys in
// blocks with an online softmax, so the (Tq, Tk) probabilities never exist
// whole. Forward writes the output and one log-sum-exp per query row;
// backward recomputes each block's probabilities from them. Called by
// ops/attention.cpp through kernels/flash_attention.h; the GPU's twin is
// kernels/cuda/flash_attention.h. Shapes: kernels/attention_dims.h.
#pragma once

#include <cstdint>

#include "kernels/attention_dims.h"
#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

// out (B, Hq, Tq, D) at out_layout = softmax(scale q k^T (+ causal mask)) v;
// lse (B, Hq, Tq), dense = log sum_j exp(scale q_i . k_j) over the keys row
// i sees. The bits of out and lse do not depend on the thread count.
template <class T>
void flash_attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionDims& dims,
                             AttentionLayout q_layout, AttentionLayout k_layout, AttentionLayout v_layout,
                             AttentionLayout out_layout, Host = {});

// With P = exp(scale q k^T - lse) (masked) and dP = dout v^T:
//   dv = P^T dout, dS = P * (dP - rowsum(dout * out)),
//   dq = scale dS k, dk = scale dS^T q,
// summed over the Hq / Hkv query heads of each key/value head in head
// order. dout and out are at out_layout. dq (B, Hq, Tq, D), dk and dv
// (B, Hkv, Tk, D) are at grad_layouts (dense_grad_layouts(dims), or q's,
// k's and v's own in one (B, T, 3C) tensor) and written, never read. The
// bits do not depend on the thread count.
template <class T>
void flash_attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                              const T* lse, const AttentionDims& dims, AttentionLayout q_layout,
                              AttentionLayout k_layout, AttentionLayout v_layout, AttentionLayout out_layout,
                              AttentionGradLayouts grad_layouts, Host = {});

}  // namespace remat::kernels::cpu
