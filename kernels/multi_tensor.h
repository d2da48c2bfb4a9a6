// The rows of a multi-tensor optimizer kernel's table: one per tensor, the
// same struct on every device (kernels/cpu/optim.h loops over them;
// kernels/cuda/optim.h copies the table to the GPU and updates every tensor
// in one launch). Plain data: raw pointers and sizes, no Tensor. Built by
// optim/adamw.cpp and optim/clip.cpp, one table per device and dtype.
#pragma once

#include <cstdint>

#include "kernels/math.h"

namespace remat::kernels {

// One parameter's AdamW step: param, exp_avg, exp_avg_sq and grad (n each),
// with the constants of its own step count (AdamwConstants<T>(hyper), made
// on the host in double and rounded to T once, so that every device's
// update of an element is the same arithmetic as adamw_step's).
template <class T>
struct AdamwTensor {
  T* param;
  T* exp_avg;
  T* exp_avg_sq;
  const T* grad;
  int64_t n;
  AdamwConstants<T> constants;
};

// One gradient (n elements) of a clip_grads call: read for its norm, then
// scaled in place.
template <class T>
struct GradTensor {
  T* data;
  int64_t n;
};

}  // namespace remat::kernels
