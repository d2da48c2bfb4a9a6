// Test support for optim/: small helpers (live bytes of a category, a float64
// leaf from values) and a tiny MLP fitting a toy regression, to check that
// each optimizer trains a real model end to end (the loss must fall by a
// large factor). Header only; used by sgd_test.cpp and adamw_test.cpp.
#pragma once

#include <utility>
#include <vector>

#include "engine/allocator.h"
#include "nn/mlp.h"
#include "ops/ops.h"

namespace remat::optim::testing {

inline int64_t live(MemoryCategory c) { return cpu_allocator().stats().live_of(c); }

// A float64 (n) leaf that requires grad.
inline Tensor leaf(const std::vector<double>& values) {
  Tensor t = from_vector(values, {static_cast<int64_t>(values.size())});
  t.requires_grad_();
  return t;
}

// A 2-16-1 MLP regressing y = x0 * x1 + 0.5 x0 on fixed points; returns the
// losses before and after `steps` steps.
template <class MakeOptimizer>
std::pair<double, double> fit_toy_problem(MakeOptimizer make, int steps) {
  Generator generator(42);
  nn::MLP mlp({2, 16, 1}, generator);
  const Tensor x = uniform({64, 2}, -1, 1, DType::Float32, generator);
  std::vector<float> targets;
  for (int64_t i = 0; i < 64; ++i) {
    const float a = x.data<float>()[2 * i], b = x.data<float>()[2 * i + 1];
    targets.push_back(a * b + 0.5f * a);
  }
  const Tensor y = from_vector(targets, {64, 1});
  auto optimizer = make(mlp.parameters());
  auto loss_now = [&]() -> Tensor {
    const Tensor d = sub(mlp.forward(x), y);
    return mean(mul(d, d));
  };
  const Tensor initial = loss_now();
  const double first = initial.item<double>();
  for (int i = 0; i < steps; ++i) {
    optimizer.zero_grad();
    loss_now().backward();
    optimizer.step();
  }
  NoGradGuard no_grad;
  const Tensor final_loss = loss_now();
  return {first, final_loss.item<double>()};
}

}  // namespace remat::optim::testing
