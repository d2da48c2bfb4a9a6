// The shape and memory layout of one fused attention call, shared by the
// CPU's kernels (kernels/cpu/flash_attention.h) and the GPU's
// (kernels/cuda/flash_attention.h) and filled in by ops/attention.cpp.
// Plain data: no device, no allocation.
#pragma once

#include <cstdint>

namespace remat::kernels {

// q (B, Hq, Tq, D); k and v (B, Hkv, Tk, D) with Hkv dividing Hq: query head
// h reads key/value head h / (Hq / Hkv) (grouped-query attention; Hkv = 1
// is multi-query, Hkv = Hq multi-head).
struct AttentionDims {
  int64_t batch = 0;     // B
  int64_t heads = 0;     // Hq
  int64_t kv_heads = 0;  // Hkv
  int64_t q_len = 0;     // Tq
  int64_t kv_len = 0;    // Tk
  int64_t head_dim = 0;  // D
  bool causal = true;    // query i sees keys 0..i (then Tq == Tk); false: every key
  double scale = 1.0;    // the scores are scale * q . k
};

// Where the (b, h, t) row of a (B, H, T, D) operand starts: at
// b * batch + h * head + t * token elements; its D elements are contiguous.
// A transposed view of a (B, T, 3C) projection is such a layout, read in
// place without a copy.
struct AttentionLayout {
  int64_t batch = 0;
  int64_t head = 0;
  int64_t token = 0;
};

// Where backward writes dq, dk and dv: dense (B, H, T, D) tensors, or the
// layouts q, k and v were read at, so that the gradient of a (B, T, 3C)
// projection's heads is written into one (B, T, 3C) tensor.
struct AttentionGradLayouts {
  AttentionLayout dq, dk, dv;
};

// The dense layout of a (B, H, T, D) tensor.
inline AttentionLayout dense_attention_layout(int64_t heads, int64_t len, int64_t head_dim) {
  return {heads * len * head_dim, len * head_dim, head_dim};
}

// dq (B, Hq, Tq, D), dk and dv (B, Hkv, Tk, D), each dense.
inline AttentionGradLayouts dense_grad_layouts(const AttentionDims& d) {
  return {dense_attention_layout(d.heads, d.q_len, d.head_dim), dense_attention_layout(d.kv_heads, d.kv_len, d.head_dim),
          dense_attention_layout(d.kv_heads, d.kv_len, d.head_dim)};
}

}  // namespace remat::kernels
