// Rotary position embedding kernels (Llama's RoPE, Hugging Face's
// rotate-half convention): a table of cos and sin per (position, frequency),
// and the rotation of x (B, H, T, D) by it, forward and backward. Called by
// ops/rotary.cpp; knows nothing of tensors or autograd. Twin:
// kernels/cuda/rotary.h.
#pragma once

#include <cstdint>

#include "kernels/args.h"
#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

// cos, sin (T, D/2): the angle of position t and frequency i < D/2 is
// t * inv_freq_i, inv_freq_i = 1 / theta^(2i / D), every step in T (for
// float, Hugging Face's float32 steps: (2i) / D, powf, the reciprocal, the
// product, cosf and sinf; for double the same in double).
template <class T>
void rotary_table(T* cos, T* sin, int64_t len, int64_t dim, double theta, Host = {});

// out (B, H, T, D) dense = x cos + rotate_half(x) sin, x laid out as dims
// says; with h = D/2 and angle i of row t, pair (x_i, x_{i+h}) becomes
//   out_i = x_i cos - x_{i+h} sin,  out_{i+h} = x_{i+h} cos + x_i sin.
template <class T>
void rotary_forward(T* out, const T* x, const T* cos, const T* sin, const RotaryDims& dims, Host = {});

// dx (B, H, T, D) dense = dout cos - rotate_half(dout) sin, dout laid out as
// dims says: the rotation by -angle, the transpose of forward's.
template <class T>
void rotary_backward(T* dx, const T* dout, const T* cos, const T* sin, const RotaryDims& dims, Host = {});

}  // namespace remat::kernels::cpu
