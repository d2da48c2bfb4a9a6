// Dropout kernels: a keep mask drawn from a counter-based generator, applied
// on the fly and never stored. Element i is kept iff
//     (words(seed, offset + i / 4)[i % 4] >> 8) >= threshold,
// the integer form of "uniform_float(word) >= p" with threshold =
// ceil(p * 2^24) (engine/rng.h's uniform_float is (word >> 8) / 2^24).
// The generator comes in as a function pointer because kernels know nothing
// of the engine: ops/dropout.cpp passes philox4x32.
#pragma once

#include <array>
#include <cstdint>

#include "kernels/args.h"
#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

using kernels::DropoutMask;
using kernels::RandomWords;

// out (n) = x * keep * scale, scale = 1 / (1 - p).
template <class T> void dropout_forward(T* out, const T* x, int64_t n, const DropoutMask& mask, T scale, Host = {});
// dx (n) = dout * keep * scale, with the mask of forward drawn again.
template <class T> void dropout_backward(T* dx, const T* dout, int64_t n, const DropoutMask& mask, T scale, Host = {});

}  // namespace remat::kernels::cpu
