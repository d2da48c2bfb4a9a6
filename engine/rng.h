// Random numbers from a counter-based generator (Philox-4x32-10, Salmon et
// al. 2011): the numbers at (seed, offset) are a pure function of both, so a
// node that records the offset it drew from can draw the same numbers again
// when it is replayed. A Generator hands out disjoint offset ranges.
#pragma once

#include <array>
#include <cstdint>

#include "engine/meta.h"

namespace remat {

// Four 32-bit random words for (seed, counter).
std::array<uint32_t, 4> philox4x32(uint64_t seed, uint64_t counter);

// A uniform float in [0, 1) from a 32-bit word, and a double from two.
inline float uniform_float(uint32_t word) { return static_cast<float>(word >> 8) * (1.0f / 16777216.0f); }
inline double uniform_double(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((static_cast<uint64_t>(hi) << 21) ^ lo) & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void manual_seed(uint64_t seed) { seed_ = seed; offset_ = 0; }
  // Continues a stream from a saved offset (resuming a training run).
  void set_offset(uint64_t offset) { offset_ = offset; }
  // Reserves `counters` consecutive counters and returns the first. In a
  // rehearsal (engine/meta.h) nothing is taken: the real step after it
  // draws the numbers it would have drawn without one.
  uint64_t reserve(uint64_t counters) {
    const uint64_t first = offset_;
    if (!MetaScope::active()) offset_ += counters;
    return first;
  }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide generator used when none is given.
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace remat
