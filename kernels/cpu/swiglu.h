// SwiGLU kernels (Llama's MLP gate): out = silu(gate) * up over dense
// arrays of n elements, forward and backward in one pass each. The silu is
// unary_math.h's Silu on the same lanes as kernels/cpu/unary.cpp, so that
// swiglu(gate, up) has the bits of mul(silu(gate), up), and its gradients
// those of that composition. Called by ops/swiglu.cpp; twin:
// kernels/cuda/swiglu.h.
#pragma once

#include <cstdint>

#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

// out (n) = silu(gate) * up, silu(g) = g s(g), s(g) = 1 / (1 + e^-g).
template <class T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n, Host = {});

// dgate (n) = silu'(gate) * (dout * up),  silu'(g) = s(g) (1 + g (1 - s(g)))
// dup (n)   = dout * silu(gate)
// Either output may be null (not wanted); dgate may be dout itself (each
// element is read before it is written).
template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n, Host = {});

}  // namespace remat::kernels::cpu
