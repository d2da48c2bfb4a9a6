// kernels/cpu/optim.h: the fused SGD and AdamW updates and clip_grads give
// the same bits at 1, 2 and 3 threads. Their formulas are tested through
// the optimizers (tests/optim/); here only the split of the loops, on
// tensors above 2 * kParallelGrain elements read at an odd offset, so that
// the threads' chunks and the vector loops start off each other's bounds.
#include "kernels/cpu/optim.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/factory.h"
#include "tests/support/thread_counts.h"

namespace remat {
namespace {

constexpr int64_t kN = 100003;
constexpr int64_t kOffset = 3;

// kOffset + kN values: a smooth ramp plus a wiggle, some of them negative.
template <class T> std::vector<T> values(double phase, double scale) {
  std::vector<T> v(static_cast<size_t>(kOffset + kN));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<T>(scale * std::sin(phase + 0.001 * static_cast<double>(i)) + 0.1 * std::cos(0.37 * i));
  }
  return v;
}

template <class T> Tensor tensor_of(const std::vector<T>& v) {
  return from_vector(v, {static_cast<int64_t>(v.size())});
}

template <class T> void expect_updates_independent_of_threads() {
  const std::string dtype(dtype_name(dtype_of<T>()));
  const std::vector<T> param0 = values<T>(0, 1), grad = values<T>(1, 0.5), state0 = values<T>(2, 0.1);
  testing::expect_bits_independent_of_threads("sgd_step " + dtype, [&] {
    std::vector<T> param = param0, buf = state0, plain = param0;
    const kernels::SgdHyper hyper{
        .lr = 0.01, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01, .nesterov = true};
    for (const bool first : {true, false}) {
      kernels::cpu::sgd_step<T>(param.data() + kOffset, buf.data() + kOffset, grad.data() + kOffset, kN, hyper, first);
    }
    kernels::cpu::sgd_step<T>(plain.data() + kOffset, nullptr, grad.data() + kOffset, kN, {.lr = 0.01}, true);
    return Tensors{tensor_of(param), tensor_of(buf), tensor_of(plain)};
  });
  testing::expect_bits_independent_of_threads("adamw_step and adamw_multi_step " + dtype, [&] {
    std::vector<T> param = param0, m = state0, v = param0, multi = param0, multi_m = state0, multi_v = param0;
    for (T& x : v) x = x * x;
    for (T& x : multi_v) x = x * x;
    const kernels::AdamwHyper hyper{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
                                    .step_size = 1e-3 / (1 - 0.9 * 0.9),  // step 2
                                    .bias_correction2_sqrt = std::sqrt(1 - 0.95 * 0.95)};
    kernels::cpu::adamw_step<T>(param.data() + kOffset, m.data() + kOffset, v.data() + kOffset, grad.data() + kOffset,
                                kN, hyper);
    kernels::cpu::adamw_multi_step<T>({{.param = multi.data() + kOffset, .exp_avg = multi_m.data() + kOffset,
                                        .exp_avg_sq = multi_v.data() + kOffset, .grad = grad.data() + kOffset,
                                        .n = kN, .constants = kernels::AdamwConstants<T>(hyper)},
                                       {.param = multi.data(), .exp_avg = multi_m.data(), .exp_avg_sq = multi_v.data(),
                                        .grad = grad.data(), .n = kOffset,
                                        .constants = kernels::AdamwConstants<T>(hyper)}});
    return Tensors{tensor_of(param), tensor_of(m), tensor_of(v), tensor_of(multi), tensor_of(multi_m),
                   tensor_of(multi_v)};
  });
  testing::expect_bits_independent_of_threads("clip_grads " + dtype, [&] {
    std::vector<T> a = grad, b = param0;
    const double norm =
        kernels::cpu::clip_grads<T>({{.data = a.data() + kOffset, .n = kN}, {.data = b.data(), .n = kN}}, 1.0);
    return Tensors{tensor_of(a), tensor_of(b), tensor_of(std::vector<double>{norm})};
  });
}

TEST(CpuOptim, BitsDoNotDependOnTheThreadCount) {
  expect_updates_independent_of_threads<float>();
  expect_updates_independent_of_threads<double>();
}

}  // namespace
}  // namespace remat
