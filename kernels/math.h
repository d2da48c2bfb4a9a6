// Per-element math written once for every device (docs/design.md,
// "Devices"): `__host__ __device__` under nvcc, plain inline functions for
// the host compiler. The CPU kernels (kernels/cpu/) and the CUDA kernels
// (kernels/cuda/) both call these, so the two devices draw the same dropout
// masks and apply the same optimizer updates; tests/kernels/math_test.cpp
// checks them on every build, GPU or not.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/args.h"

#if defined(__CUDACC__)
#define REMAT_HOST_DEVICE __host__ __device__ inline
#else
#define REMAT_HOST_DEVICE inline
#endif

namespace remat::kernels {

// Philox-4x32-10 (Salmon et al. 2011): four 32-bit words that are a pure
// function of (seed, counter), so a replay draws them again.
struct Words4 {
  uint32_t w[4];
};

REMAT_HOST_DEVICE Words4 philox4x32(uint64_t seed, uint64_t counter) {
  constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {{c0, c1, c2, c3}};
}

// Dropout keeps element i iff the word for it, word i % 4 of the draw at
// counter offset + i / 4, passes the threshold: (word >> 8) >= threshold is
// the integer form of uniform_float(word) >= p, threshold = ceil(p 2^24).
REMAT_HOST_DEVICE bool dropout_keeps(uint32_t word, uint32_t threshold) { return (word >> 8) >= threshold; }

// One SGD step of one element (kernels/cpu/optim.h has the formula);
// `momentum_buf` null when momentum == 0.
template <class T>
REMAT_HOST_DEVICE void sgd_update(T& param, T* momentum_buf, T grad, T lr, T weight_decay, bool decay, T momentum,
                                  T keep, bool nesterov, bool first) {
  const T g = decay ? grad + weight_decay * param : grad;
  if (momentum_buf == nullptr) {
    param = param - lr * g;
    return;
  }
  // The first buffer is the gradient itself, with no dampening (as in PyTorch).
  const T buf = first ? g : *momentum_buf * momentum + keep * g;
  *momentum_buf = buf;
  const T direction = nesterov ? g + momentum * buf : buf;
  param = param - lr * direction;
}

// AdamW's constants in the element type, made once per tensor.
template <class T>
struct AdamwConstants {
  T decay, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, step_size, bias_correction2_sqrt;
  explicit AdamwConstants(const AdamwHyper& h)
      : decay(static_cast<T>(1.0 - h.lr * h.weight_decay)),
        beta1(static_cast<T>(h.beta1)),
        beta2(static_cast<T>(h.beta2)),
        one_minus_beta1(static_cast<T>(1.0 - h.beta1)),
        one_minus_beta2(static_cast<T>(1.0 - h.beta2)),
        eps(static_cast<T>(h.eps)),
        step_size(static_cast<T>(h.step_size)),
        bias_correction2_sqrt(static_cast<T>(h.bias_correction2_sqrt)) {}
};

// One AdamW step of one element:
//   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
//   param = param (1 - lr wd) - step_size m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
template <class T>
REMAT_HOST_DEVICE void adamw_update(T& param, T& exp_avg, T& exp_avg_sq, T grad, const AdamwConstants<T>& k) {
  const T m = k.beta1 * exp_avg + k.one_minus_beta1 * grad;
  const T v = k.beta2 * exp_avg_sq + k.one_minus_beta2 * grad * grad;
  exp_avg = m;
  exp_avg_sq = v;
  // Decoupled weight decay acts on the parameter before the Adam step.
  const T p = param * k.decay;
  param = p - k.step_size * m / (std::sqrt(v) / k.bias_correction2_sqrt + k.eps);
}

}  // namespace remat::kernels
