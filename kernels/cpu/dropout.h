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

namespace remat::kernels::cpu {

using RandomWords = std::array<uint32_t, 4> (*)(uint64_t seed, uint64_t counter);

struct DropoutMask {
  RandomWords words;
  uint64_t seed;
  uint64_t offset;     // counter of elements 0..3; ceil(n / 4) counters are read
  uint32_t threshold;  // keep iff (word >> 8) >= threshold
};

// out (n) = x * keep * scale, scale = 1 / (1 - p).
template <class T> void dropout_forward(T* out, const T* x, int64_t n, const DropoutMask& mask, T scale);
// dx (n) = dout * keep * scale, with the mask of forward drawn again.
template <class T> void dropout_backward(T* dx, const T* dout, int64_t n, const DropoutMask& mask, T scale);

}  // namespace remat::kernels::cpu
