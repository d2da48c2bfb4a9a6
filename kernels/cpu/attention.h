// The causal softmax of attention on the CPU: softmax over the last axis of
// dense (rows, n) scores, where row r is row i = r % n of an (n, n) matrix
// and sees only columns 0..i; the columns j > i of the output are 0. It is
// masked_fill(x, j > i, -inf) followed by softmax, bit for bit, without the
// mask tensor (see attention.cpp). Called by ops/attention.cpp through kernels/attention.h.
#pragma once

#include <cstdint>

#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

// out (rows, n) = softmax of each row's prefix 0..i, 0 after it. rows is a
// multiple of n. out may be x (each element is read before it is written).
template <class T> void causal_softmax_forward(T* out, const T* x, int64_t rows, int64_t n, Host = {});
// dx = out * (dout - sum_{j <= i}(dout * out)) on the prefix, 0 after it.
// dout is read whole (softmax_backward's loop; out is 0 after the prefix).
// dx may be dout.
template <class T>
void causal_softmax_backward(T* dx, const T* dout, const T* out, int64_t rows, int64_t n, Host = {});

}  // namespace remat::kernels::cpu
