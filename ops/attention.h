// Attention ops. causal_softmax: the mask and softmax of causal attention
// as one op, over the (..., T, T) scores of q k^T (nn/gpt.cpp); it is
// softmax(masked_fill(x, causal_mask(T), -inf), -1), bit for bit on the CPU,
// without the (T, T) mask tensor. attention: the whole of softmax(scale q
// k^T) v as one fused node (kernels/flash_attention.h), which never holds
// the (T, T) scores; attention_qkv the same over one packed projection.
#pragma once

#include <optional>

#include "engine/tensor.h"

namespace remat {

// x (..., T, T) float32 or float64 -> (..., T, T): row i of each matrix is
// the softmax of its columns 0..i, and exactly 0 at columns j > i (the
// future, which the row never reads). Saves only its output, as softmax:
//   dx_ij = y_ij (dy_ij - sum_{k <= i} dy_ik y_ik) for j <= i, 0 for j > i.
Tensor causal_softmax(const Tensor& x);

struct AttentionOptions {
  bool causal = true;           // query i sees keys 0..i (needs Tq == Tk); false: every key
  std::optional<double> scale;  // the scores are scale q . k; default 1 / sqrt(D)
  // The output as (B, Tq, Hq, D) instead of (B, Hq, Tq, D): the heads side
  // by side, so (B, Tq, Hq D) is a view of it, not a copy (GPT's and
  // Llama's output projection reads it so).
  bool tokens_first = false;
};

// q (B, Hq, Tq, D), k and v (B, Hkv, Tk, D), float32 or float64, Hkv
// dividing Hq (query head h reads kv head h / (Hq / Hkv): grouped-query,
// multi-query at Hkv = 1) -> (B, Hq, Tq, D), or (B, Tq, Hq, D) with tokens_first:
//   out = softmax(scale q k^T (+ causal mask), -1) v.
// Views whose last axis is contiguous (heads transposed out of a (B, T, 3C)
// projection) are read in place; others are copied dense. Saves q, k, v,
// its output and one log-sum-exp per query row (B, Hq, Tq); backward
// recomputes the probabilities from them, a block at a time. With
// P = softmax(...), dP = dout v^T, dS = P (dP - rowsum(dout * out)):
//   dq = scale dS k,  dk = scale dS^T q,  dv = P^T dout
// (dk, dv summed over the query heads of each kv head).
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, AttentionOptions options = {});

// attention() over one packed projection: qkv (B, T, (Hq + 2 Hkv) D) holds
// q's Hq heads, then k's and v's Hkv heads each, along its last axis (GPT-2's
// c_attn output, Hq = Hkv = H) -> (B, T, Hq D), the heads side by side
// (options.tokens_first is implied). The same kernels and bits as
// attention() on the three heads' views; one node, whose backward writes
// dq, dk and dv straight into qkv's gradient, where the views' way makes
// three zero-filled (B, T, 3C) gradients and sums them. Saves qkv, the
// output and the log-sum-exp.
Tensor attention_qkv(const Tensor& qkv, int64_t heads, int64_t kv_heads, AttentionOptions options = {});

}  // namespace remat
