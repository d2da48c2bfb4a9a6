// SGD: each option against torch.optim.SGD's update written out in double,
// momentum state bytes, zero_grad, errors, and a tiny MLP that learns.
#include "optim/sgd.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/allocator.h"
#include "kernels/cpu/parallel.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "tests/optim/toy_problem.h"

namespace remat::optim {
namespace {

using testing::leaf;
using testing::live;

// Three steps of SGD(options) on p0 with gradients grads[step], by hand in
// double, next to the optimizer's run; both must agree to rounding.
void expect_sgd_matches_formula(const SGDOptions& o) {
  const std::vector<double> p0{0.5, -1.25, 2.0};
  const std::vector<std::vector<double>> grads{{0.1, -0.2, 0.3}, {-0.4, 0.5, 0.25}, {0.05, 0.0, -0.75}};

  std::vector<double> p = p0, buf(p0.size());
  for (size_t step = 0; step < grads.size(); ++step) {
    for (size_t j = 0; j < p.size(); ++j) {
      double g = grads[step][j] + o.weight_decay * p[j];
      if (o.momentum != 0) {
        buf[j] = step == 0 ? g : o.momentum * buf[j] + (1 - o.dampening) * g;
        g = o.nesterov ? g + o.momentum * buf[j] : buf[j];
      }
      p[j] -= o.lr * g;
    }
  }

  const Tensor param = leaf(p0);
  SGD sgd({param}, o);
  for (const auto& g : grads) {
    param.set_grad(from_vector(g, {3}));
    sgd.step();
  }
  const std::vector<double> got = param.to_vector<double>();
  for (size_t j = 0; j < p.size(); ++j) EXPECT_NEAR(got[j], p[j], 1e-14) << "element " << j;
  if (o.momentum != 0) {
    const std::vector<double> got_buf = sgd.momentum_buffer(0).to_vector<double>();
    for (size_t j = 0; j < p.size(); ++j) EXPECT_NEAR(got_buf[j], buf[j], 1e-14) << "buffer element " << j;
  } else {
    EXPECT_FALSE(sgd.momentum_buffer(0).defined());
  }
}

TEST(SGD, Plain) { expect_sgd_matches_formula({.lr = 0.1}); }
TEST(SGD, Momentum) { expect_sgd_matches_formula({.lr = 0.1, .momentum = 0.9}); }
TEST(SGD, MomentumWithDampening) { expect_sgd_matches_formula({.lr = 0.05, .momentum = 0.8, .dampening = 0.3}); }
TEST(SGD, Nesterov) { expect_sgd_matches_formula({.lr = 0.1, .momentum = 0.9, .nesterov = true}); }
TEST(SGD, WeightDecay) { expect_sgd_matches_formula({.lr = 0.1, .weight_decay = 0.01}); }
TEST(SGD, EverythingTogether) {
  expect_sgd_matches_formula({.lr = 0.2, .momentum = 0.5, .weight_decay = 0.1, .nesterov = true});
}

TEST(SGD, HandComputedFirstSteps) {
  // p = 1, g = 2 twice, lr 0.1, momentum 0.5: buf 2 then 0.5*2 + 2 = 3;
  // p = 1 - 0.2 = 0.8, then 0.8 - 0.3 = 0.5.
  const Tensor p = leaf({1.0});
  SGD sgd({p}, {.lr = 0.1, .momentum = 0.5});
  p.set_grad(from_vector(std::vector<double>{2.0}, {1}));
  sgd.step();
  EXPECT_DOUBLE_EQ(p.item<double>(), 0.8);
  sgd.step();
  EXPECT_DOUBLE_EQ(p.item<double>(), 0.5);
  EXPECT_DOUBLE_EQ(sgd.momentum_buffer(0).item<double>(), 3.0);
}

TEST(SGD, Float32FollowsTheSameFormula) {
  Tensor p = from_vector(std::vector<float>{1.0f, -2.0f}, {2});
  p.requires_grad_();
  SGD sgd({p}, {.lr = 0.5, .momentum = 0.9, .weight_decay = 0.1});
  p.set_grad(from_vector(std::vector<float>{0.25f, 1.0f}, {2}));
  sgd.step();
  sgd.step();
  // step 1: g = (0.35, 0.8), p = (0.825, -2.4); step 2: g = (0.3325, 0.76),
  // buf = (0.6475, 1.48), p = (0.50125, -3.14)
  const std::vector<float> got = p.to_vector<float>();
  EXPECT_NEAR(got[0], 0.50125, 1e-6);
  EXPECT_NEAR(got[1], -3.14, 1e-6);
}

TEST(SGD, LargeTensorTakesTheThreadedPath) {
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
  SGD sgd({p}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  p.set_grad(from_vector(g, {n}));
  sgd.step();
  const std::vector<double> got = p.to_vector<double>();
  for (int64_t i = 0; i < n; i += 997) {
    const double d = g[i] + 0.01 * p0[i];
    EXPECT_NEAR(got[i], p0[i] - 0.1 * (d + 0.9 * d), 1e-14) << "element " << i;
  }
}

TEST(SGD, ParameterWithoutGradIsSkipped) {
  const Tensor a = leaf({1.0}), b = leaf({2.0});
  SGD sgd({a, b}, {.lr = 1.0, .momentum = 0.9});
  a.set_grad(from_vector(std::vector<double>{0.5}, {1}));
  sgd.step();
  EXPECT_DOUBLE_EQ(a.item<double>(), 0.5);
  EXPECT_DOUBLE_EQ(b.item<double>(), 2.0);
  EXPECT_FALSE(sgd.momentum_buffer(1).defined());
}

TEST(SGD, SetLrTakesEffect) {
  const Tensor p = leaf({1.0});
  SGD sgd({p}, {.lr = 0.1});
  sgd.set_lr(0.5);
  EXPECT_DOUBLE_EQ(sgd.lr(), 0.5);
  p.set_grad(from_vector(std::vector<double>{1.0}, {1}));
  sgd.step();
  EXPECT_DOUBLE_EQ(p.item<double>(), 0.5);
  EXPECT_THROW(sgd.set_lr(-1), Error);
}

TEST(SGD, MomentumStateBytesAreExact) {
  nn::MLP mlp({20, 30, 5});
  const int64_t param_bytes = mlp.num_parameters() * 4;
  sum(mlp.forward(randn({4, 20}))).backward();
  const int64_t before = live(MemoryCategory::OptimizerState);
  {
    SGD plain(mlp.parameters(), {.lr = 0.0});
    plain.step();
    EXPECT_EQ(live(MemoryCategory::OptimizerState), before);  // no momentum, no state
  }
  {
    SGD sgd(mlp.parameters(), {.lr = 0.0, .momentum = 0.9});
    EXPECT_EQ(live(MemoryCategory::OptimizerState), before);  // allocated on the first step
    sgd.step();
    EXPECT_EQ(live(MemoryCategory::OptimizerState) - before, param_bytes);
    sgd.step();
    EXPECT_EQ(live(MemoryCategory::OptimizerState) - before, param_bytes);
  }
  EXPECT_EQ(live(MemoryCategory::OptimizerState), before);
}

TEST(SGD, ZeroGradFreesGradientBytes) {
  nn::MLP mlp({20, 30, 5});
  SGD sgd(mlp.parameters(), {.lr = 0.1});
  const int64_t before = live(MemoryCategory::Gradient);
  sum(mlp.forward(randn({4, 20}))).backward();
  EXPECT_EQ(live(MemoryCategory::Gradient) - before, mlp.num_parameters() * 4);
  sgd.step();
  sgd.zero_grad();
  EXPECT_EQ(live(MemoryCategory::Gradient), before);
  for (const Tensor& p : mlp.parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(SGD, NesterovNeedsMomentumAndNoDampening) {
  const Tensor p = leaf({1.0});
  try {
    SGD sgd({p}, {.lr = 0.1, .momentum = 0.0, .nesterov = true});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("momentum 0"), std::string::npos) << e.what();
  }
  try {
    SGD sgd({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dampening 0.1"), std::string::npos) << e.what();
  }
}

TEST(SGD, BadArgumentsAreErrors) {
  const Tensor p = leaf({1.0});
  EXPECT_THROW(SGD({p}, {.lr = -0.1}), Error);
  EXPECT_THROW(SGD({p}, {.lr = 0.1, .momentum = -1}), Error);
  EXPECT_THROW(SGD({from_vector(std::vector<double>{1.0}, {1})}, {.lr = 0.1}), Error);  // no requires_grad
  EXPECT_THROW(SGD({p, p}, {.lr = 0.1}), Error);  // listed twice
  p.set_grad(from_vector(std::vector<double>{1.0, 2.0}, {2}));
  SGD sgd({p}, {.lr = 0.1});
  EXPECT_THROW(sgd.step(), Error);  // gradient shape differs from the parameter
}

TEST(SGD, TinyMLPFitsAToyProblem) {
  const auto [first, last] =
      testing::fit_toy_problem([](std::vector<Tensor> ps) { return SGD(std::move(ps), {.lr = 0.1, .momentum = 0.9}); }, 500);
  EXPECT_LT(last, first / 50) << "loss " << first << " -> " << last;
}

TEST(SGD, StepBetweenForwardAndBackwardIsCaught) {
  const Tensor w = leaf({1.0, 2.0});
  const Tensor x = from_vector(std::vector<double>{3.0, 4.0}, {2});
  w.set_grad(from_vector(std::vector<double>{1.0, 1.0}, {2}));
  Tensor loss = sum(mul(w, x));  // mul saves x only (w's gradient needs x), so w is read nowhere...
  Tensor loss_reading_w = sum(mul(w, w));  // ...but here it is
  SGD sgd({w}, {.lr = 0.1});
  sgd.step();
  loss.backward();  // fine: nothing saved was changed
  EXPECT_THROW(loss_reading_w.backward(), Error);
}

}  // namespace
}  // namespace remat::optim
