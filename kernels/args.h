// The plain arguments that a kernel takes on every device: which binary op,
// a dropout mask's draw, the optimizers' hyperparameters. Ops build them;
// kernels/cpu/ (and a device's launchers) read them. No pointers to data.
#pragma once

#include <cstdint>

namespace remat::kernels {

enum class BinaryOp { Add, Sub, Mul, Div };

// Element i is kept iff (word i % 4 of Philox at counter offset + i / 4)
// >> 8 is at least threshold, i.e. with probability 1 - p (kernels/math.h).
struct DropoutMask {
  uint64_t seed;
  uint64_t offset;     // counter of elements 0..3; ceil(n / 4) counters are read
  uint32_t threshold;  // keep iff (word >> 8) >= threshold
};

struct SgdHyper {
  double lr = 0;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

struct AdamwHyper {
  double lr = 0;
  double beta1 = 0;
  double beta2 = 0;
  double eps = 0;
  double weight_decay = 0;
  double step_size = 0;              // lr / (1 - beta1^step)
  double bias_correction2_sqrt = 1;  // sqrt(1 - beta2^step)
};

// Rotary embeddings over x (B, H, T, D), D even: the (b, h, t) row of x
// starts at b * batch_stride + h * head_stride + t * token_stride elements
// and its D elements are contiguous (a transposed view of a (B, T, H, D)
// projection is read in place); the output is dense (B, H, T, D).
struct RotaryDims {
  int64_t batch = 0, heads = 0, len = 0, dim = 0;
  int64_t batch_stride = 0, head_stride = 0, token_stride = 0;
};

}  // namespace remat::kernels
