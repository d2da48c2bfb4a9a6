// AdamW: the update against torch.optim.AdamW's formulas written out in
// double, decoupled decay, per-parameter step counts, state bytes, and a
// tiny MLP that learns.
#include "kernels/cpu/parallel.h"
#include "optim/adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/allocator.h"
#include "kernels/cpu/optim.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "tests/optim/toy_problem.h"

namespace remat::optim {
namespace {

using testing::leaf;
using testing::live;

void expect_adamw_matches_formula(const AdamWOptions& o) {
  const std::vector<double> p0{0.5, -1.25, 2.0};
  const std::vector<std::vector<double>> grads{{0.1, -0.2, 0.3}, {-0.4, 0.5, 0.25}, {0.05, 0.0, -0.75}};

  std::vector<double> p = p0, m(3, 0.0), v(3, 0.0);
  for (size_t step = 1; step <= grads.size(); ++step) {
    for (size_t j = 0; j < p.size(); ++j) {
      const double g = grads[step - 1][j];
      p[j] *= 1 - o.lr * o.weight_decay;
      m[j] = o.beta1 * m[j] + (1 - o.beta1) * g;
      v[j] = o.beta2 * v[j] + (1 - o.beta2) * g * g;
      const double m_hat = m[j] / (1 - std::pow(o.beta1, static_cast<double>(step)));
      const double v_hat = v[j] / (1 - std::pow(o.beta2, static_cast<double>(step)));
      p[j] -= o.lr * m_hat / (std::sqrt(v_hat) + o.eps);
    }
  }

  const Tensor param = leaf(p0);
  AdamW adamw({param}, o);
  for (const auto& g : grads) {
    param.set_grad(from_vector(g, {3}));
    adamw.step();
  }
  EXPECT_EQ(adamw.step_count(0), 3);
  const std::vector<double> got = param.to_vector<double>();
  const std::vector<double> got_m = adamw.exp_avg(0).to_vector<double>();
  const std::vector<double> got_v = adamw.exp_avg_sq(0).to_vector<double>();
  for (size_t j = 0; j < p.size(); ++j) {
    // The hand formula divides in another order (m_hat / (sqrt(v_hat) + eps)
    // against PyTorch's (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)), so the
    // two agree to rounding, not bit for bit.
    EXPECT_NEAR(got[j], p[j], 1e-12) << "element " << j;
    EXPECT_NEAR(got_m[j], m[j], 1e-15) << "exp_avg element " << j;
    EXPECT_NEAR(got_v[j], v[j], 1e-15) << "exp_avg_sq element " << j;
  }
}

TEST(AdamW, Defaults) {
  const AdamWOptions o;
  EXPECT_EQ(o.lr, 1e-3);
  EXPECT_EQ(o.beta1, 0.9);
  EXPECT_EQ(o.beta2, 0.999);
  EXPECT_EQ(o.eps, 1e-8);
  EXPECT_EQ(o.weight_decay, 1e-2);
  expect_adamw_matches_formula(o);
}
TEST(AdamW, NoWeightDecay) { expect_adamw_matches_formula({.lr = 0.1, .weight_decay = 0}); }
TEST(AdamW, OtherBetasAndEps) {
  expect_adamw_matches_formula({.lr = 0.05, .beta1 = 0.5, .beta2 = 0.9, .eps = 1e-3, .weight_decay = 0.1});
}

TEST(AdamW, FirstStepMovesEachElementByAboutLr) {
  // Step 1: m_hat = g and v_hat = g^2, so p moves by lr * g / (|g| + eps).
  const Tensor p = leaf({1.0, 1.0});
  AdamW adamw({p}, {.lr = 0.01, .eps = 0.0, .weight_decay = 0.0});
  p.set_grad(from_vector(std::vector<double>{3.0, -0.002}, {2}));
  adamw.step();
  EXPECT_NEAR(p.to_vector<double>()[0], 0.99, 1e-15);
  EXPECT_NEAR(p.to_vector<double>()[1], 1.01, 1e-15);
}

TEST(AdamW, DecayIsDecoupledFromTheGradient) {
  // With a zero gradient the Adam part is 0 / (0 + eps) = 0, and only the
  // decay p *= 1 - lr * wd acts.
  const Tensor p = leaf({2.0, -4.0});
  AdamW adamw({p}, {.lr = 0.1, .weight_decay = 0.5});
  p.set_grad(zeros({2}, DType::Float64));
  adamw.step();
  adamw.step();
  EXPECT_EQ(p.to_vector<double>(), (std::vector<double>{2.0 * 0.95 * 0.95, -4.0 * 0.95 * 0.95}));
}

TEST(AdamW, LargeTensorTakesTheThreadedPath) {
  // Two threads even where OMP_NUM_THREADS=1, so the split loops really run.
  const kernels::cpu::NumThreadsGuard two_threads(2);
  // Above 2 * kParallelGrain elements the kernel splits across threads.
  const int64_t n = 100000;
  std::vector<double> p0(n), g(n);
  for (int64_t i = 0; i < n; ++i) {
    p0[i] = std::sin(0.001 * static_cast<double>(i));
    g[i] = std::cos(0.003 * static_cast<double>(i));
  }
  const Tensor p = leaf(p0);
  AdamW adamw({p}, {.lr = 0.01, .eps = 1e-6, .weight_decay = 0.1});
  p.set_grad(from_vector(g, {n}));
  adamw.step();
  const std::vector<double> got = p.to_vector<double>();
  for (int64_t i = 0; i < n; i += 997) {
    // Step 1: m_hat = g, v_hat = g^2.
    const double want = p0[i] * (1 - 0.01 * 0.1) - 0.01 * g[i] / (std::abs(g[i]) + 1e-6);
    EXPECT_NEAR(got[i], want, 1e-12) << "element " << i;
  }
}

TEST(AdamW, StepCountsArePerParameter) {
  const Tensor a = leaf({1.0}), b = leaf({1.0});
  AdamW adamw({a, b}, {.lr = 0.1});
  a.set_grad(from_vector(std::vector<double>{1.0}, {1}));
  adamw.step();
  adamw.step();
  EXPECT_EQ(adamw.step_count(0), 2);
  EXPECT_EQ(adamw.step_count(1), 0);  // no grad: skipped, no state
  EXPECT_FALSE(adamw.exp_avg(1).defined());
  EXPECT_EQ(b.item<double>(), 1.0);
  b.set_grad(from_vector(std::vector<double>{1.0}, {1}));
  adamw.step();
  EXPECT_EQ(adamw.step_count(0), 3);
  EXPECT_EQ(adamw.step_count(1), 1);
  // b's first step has bias-corrected m_hat / sqrt(v_hat) = 1: it moves by
  // lr (after the decay 1 - 0.1 * 0.01).
  EXPECT_NEAR(b.item<double>(), 0.999 - 0.1, 1e-8);
}

TEST(AdamW, Float32FollowsTheSameFormula) {
  Tensor p = from_vector(std::vector<float>{0.5f, -1.0f}, {2});
  p.requires_grad_();
  AdamW adamw({p}, {.lr = 0.1});
  p.set_grad(from_vector(std::vector<float>{0.3f, 0.7f}, {2}));
  adamw.step();
  const Tensor q = leaf({0.5, -1.0});
  AdamW reference({q}, {.lr = 0.1});
  q.set_grad(from_vector(std::vector<double>{0.3, 0.7}, {2}));
  reference.step();
  const std::vector<float> got = p.to_vector<float>();
  const std::vector<double> want = q.to_vector<double>();
  EXPECT_NEAR(got[0], want[0], 1e-6);
  EXPECT_NEAR(got[1], want[1], 1e-6);
}

// adamw_multi_step on the CPU is adamw_step a tensor, bit for bit (each
// tensor with its own constants), below and above the threaded size.
TEST(AdamW, MultiStepIsAdamwStepATensor) {
  const std::vector<int64_t> sizes{1, 31, 70000, 5};
  std::vector<std::vector<float>> p, m, v, g;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const auto n = static_cast<size_t>(sizes[k]);
    p.emplace_back(n), m.emplace_back(n), v.emplace_back(n), g.emplace_back(n);
    for (size_t i = 0; i < n; ++i) {
      p[k][i] = std::sin(static_cast<float>(i + k));
      m[k][i] = 0.01f * std::cos(static_cast<float>(i));
      v[k][i] = 1e-4f * static_cast<float>(i % 7);
      g[k][i] = std::cos(static_cast<float>(3 * i + k));
    }
  }
  auto single_p = p, single_m = m, single_v = v;
  std::vector<kernels::AdamwTensor<float>> rows;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const double t = static_cast<double>(k + 1);
    const kernels::AdamwHyper hyper{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
                                    .step_size = 1e-3 / (1 - std::pow(0.9, t)),
                                    .bias_correction2_sqrt = std::sqrt(1 - std::pow(0.95, t))};
    kernels::cpu::adamw_step<float>(single_p[k].data(), single_m[k].data(), single_v[k].data(), g[k].data(), sizes[k],
                                    hyper);
    rows.push_back({p[k].data(), m[k].data(), v[k].data(), g[k].data(), sizes[k], kernels::AdamwConstants<float>(hyper)});
  }
  kernels::cpu::adamw_multi_step<float>(rows);
  for (size_t k = 0; k < sizes.size(); ++k) {
    const size_t bytes = p[k].size() * sizeof(float);
    EXPECT_EQ(std::memcmp(p[k].data(), single_p[k].data(), bytes), 0) << "tensor " << k;
    EXPECT_EQ(std::memcmp(m[k].data(), single_m[k].data(), bytes), 0) << "tensor " << k;
    EXPECT_EQ(std::memcmp(v[k].data(), single_v[k].data(), bytes), 0) << "tensor " << k;
  }
}

TEST(AdamW, StateBytesAreExact) {
  nn::MLP mlp({20, 30, 5});
  sum(mlp.forward(randn({4, 20}))).backward();
  const int64_t before = live(MemoryCategory::OptimizerState);
  {
    AdamW adamw(mlp.parameters());
    EXPECT_EQ(live(MemoryCategory::OptimizerState), before);
    adamw.step();
    EXPECT_EQ(live(MemoryCategory::OptimizerState) - before, 2 * mlp.num_parameters() * 4);  // m and v
    adamw.step();
    EXPECT_EQ(live(MemoryCategory::OptimizerState) - before, 2 * mlp.num_parameters() * 4);
  }
  EXPECT_EQ(live(MemoryCategory::OptimizerState), before);
}

TEST(AdamW, ZeroGradFreesGradientBytes) {
  nn::MLP mlp({8, 4});
  AdamW adamw(mlp.parameters());
  const int64_t before = live(MemoryCategory::Gradient);
  sum(mlp.forward(randn({2, 8}))).backward();
  EXPECT_EQ(live(MemoryCategory::Gradient) - before, (8 * 4 + 4) * 4);
  adamw.zero_grad();
  EXPECT_EQ(live(MemoryCategory::Gradient), before);
}

TEST(AdamW, BadOptionsNameTheValue) {
  const Tensor p = leaf({1.0});
  try {
    AdamW adamw({p}, {.beta1 = 1.5});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1.5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(AdamW({p}, {.beta2 = 1.0}), Error);
  EXPECT_THROW(AdamW({p}, {.eps = -1}), Error);
  EXPECT_THROW(AdamW({p}, {.lr = -1}), Error);
  EXPECT_THROW(AdamW({p}, {.weight_decay = -1}), Error);
}

TEST(AdamW, TinyMLPFitsAToyProblem) {
  const auto [first, last] = testing::fit_toy_problem(
      [](std::vector<Tensor> ps) { return AdamW(std::move(ps), {.lr = 0.01, .weight_decay = 0.0}); }, 500);
  EXPECT_LT(last, first / 50) << "loss " << first << " -> " << last;
}

TEST(AdamW, StateDictRoundTripAndErrors) {
  Tensor p = from_vector(std::vector<double>{1.0, 2.0}, {2});
  p.requires_grad_();
  AdamW a({p});
  EXPECT_TRUE(a.state_dict().empty());
  p.set_grad(from_vector(std::vector<double>{0.5, -1.0}, {2}));
  a.step();
  const auto state = a.state_dict();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0].first, "0.exp_avg");
  // m after one step: (1 - beta1) g
  EXPECT_NEAR(state[0].second.to_vector<double>()[0], 0.1 * 0.5, 1e-15);

  Tensor q = from_vector(std::vector<double>{0.0, 0.0}, {2});
  q.requires_grad_();
  AdamW b({q});
  b.load_state_dict(state);
  EXPECT_EQ(b.step_count(0), 1);
  EXPECT_EQ(b.exp_avg(0).to_vector<double>(), a.exp_avg(0).to_vector<double>());

  AdamW c({q});
  EXPECT_THROW(c.load_state_dict({{"x.exp_avg", state[0].second}}), Error);
  EXPECT_THROW(c.load_state_dict({{"0.exp_avg", zeros({3}, DType::Float64)}}), Error);
  EXPECT_THROW(c.load_state_dict({state[0]}), Error);  // exp_avg_sq and step missing
  EXPECT_EQ(c.step_count(0), 0);                      // nothing changed
  EXPECT_FALSE(c.exp_avg(0).defined());
}

}  // namespace
}  // namespace remat::optim
