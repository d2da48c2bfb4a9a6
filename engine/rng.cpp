// The generators; Philox-4x32-10 itself is kernels/math.h's, which the CPU
// and CUDA dropout kernels call too.
#include "engine/rng.h"

#include "kernels/math.h"

namespace remat {

std::array<uint32_t, 4> philox4x32(uint64_t seed, uint64_t counter) {
  const kernels::Words4 words = kernels::philox4x32(seed, counter);  // the one Philox, shared with the kernels
  return {words.w[0], words.w[1], words.w[2], words.w[3]};
}

Generator& default_generator() {
  static Generator generator(0);
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace remat
