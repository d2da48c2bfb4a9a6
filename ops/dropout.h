// dropout with a counter-based mask: forward draws the keep mask from
// Philox at (seed, offset) reserved from the generator and records both, so
// backward (and a replay) draws the very same mask again instead of saving it.
#pragma once

#include "engine/rng.h"
#include "engine/tensor.h"

namespace remat {

// Zeroes each element with probability p and scales the rest by 1/(1-p);
// returns x itself when !training or p == 0. p must be in [0, 1).
Tensor dropout(const Tensor& x, double p, bool training = true, Generator& generator = default_generator());

}  // namespace remat
