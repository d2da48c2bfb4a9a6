// Dropout kernels: a keep mask drawn from a counter-based generator, applied
// on the fly and never stored. Element i is kept iff
//     (philox4x32(seed, offset + i / 4)[i % 4] >> 8) >= threshold,
// the integer form of "uniform_float(word) >= p" with threshold =
// ceil(p * 2^24) (engine/rng.h's uniform_float is (word >> 8) / 2^24);
// Philox and the rule are kernels/math.h's, shared with the CUDA kernels.
#pragma once

#include <cstdint>

#include "kernels/args.h"
#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

using kernels::DropoutMask;

// out (n) = x * keep * scale, scale = 1 / (1 - p).
template <class T> void dropout_forward(T* out, const T* x, int64_t n, const DropoutMask& mask, T scale, Host = {});
// dx (n) = dout * keep * scale, with the mask of forward drawn again.
template <class T> void dropout_backward(T* dx, const T* dout, int64_t n, const DropoutMask& mask, T scale, Host = {});

}  // namespace remat::kernels::cpu
