// rotary, Llama's rotary position embeddings (RoPE) in Hugging Face's
// rotate-half convention, as one op with a fused kernel per device
// (kernels/rotary.h). Called by models (nn/) on q and k, and Python.
#pragma once

#include "engine/tensor.h"

namespace remat {

// x (B, H, T, D), D even, at positions 0..T-1:
//   y = x cos + rotate_half(x) sin,  rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2])
// with cos and sin of angle(t, i) = t * theta^(-2i/D) for i < D/2, repeated
// twice along D (cat(freqs, freqs)). x may be any view whose last axis is
// contiguous (q of a (B, T, H, D) projection transposed to (B, H, T, D)) and
// is read in place; y is dense (B, H, T, D). The angles are computed in x's
// dtype (float32 as Hugging Face does; float64 exactly). Saves nothing.
Tensor rotary(const Tensor& x, double theta = 10000.0);

}  // namespace remat
