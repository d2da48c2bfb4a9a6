// The per-element math both devices share (kernels/math.h; GELU's in kernels/unary_math.h), checked on every
// build: Philox against the published answers, the dropout rule at its
// threshold, and the optimizer updates against their formulas in float64.
#include "kernels/math.h"
#include "kernels/unary_math.h"

#include <gtest/gtest.h>

#include <cmath>

namespace remat::kernels {
namespace {

// The known answer for Philox-4x32-10 at counter 0 and key 0 (Salmon et al.,
// Random123's kat_vectors).
TEST(Math, PhiloxGivesTheKnownAnswer) {
  const Words4 zero = philox4x32(0, 0);
  EXPECT_EQ(zero.w[0], 0x6627e8d5u);
  EXPECT_EQ(zero.w[1], 0xe169c58du);
  EXPECT_EQ(zero.w[2], 0xbc57ac4cu);
  EXPECT_EQ(zero.w[3], 0x9b00dbd8u);
  // Different counters and seeds give different words.
  EXPECT_NE(philox4x32(0, 1).w[0], zero.w[0]);
  EXPECT_NE(philox4x32(1, 0).w[0], zero.w[0]);
}

TEST(Math, DropoutKeepsAWordAtOrAboveItsThreshold) {
  const uint32_t threshold = 1u << 23;  // p = 0.5
  EXPECT_TRUE(dropout_keeps(threshold << 8, threshold));
  EXPECT_FALSE(dropout_keeps((threshold << 8) - 1, threshold));
  EXPECT_TRUE(dropout_keeps(0, 0));  // p = 0 keeps everything
}

TEST(Math, AdamwUpdatesAsItsFormula) {
  const AdamwHyper hyper{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1,
                         .step_size = 0.01 / (1 - 0.9), .bias_correction2_sqrt = std::sqrt(1 - 0.999)};
  double param = 0.5, m = 0.2, v = 0.04;
  const double g = -0.3;
  adamw_update<double>(param, m, v, g, AdamwConstants<double>(hyper));
  const double m_expected = 0.9 * 0.2 + 0.1 * g, v_expected = 0.999 * 0.04 + 0.001 * g * g;
  EXPECT_DOUBLE_EQ(m, m_expected);
  EXPECT_DOUBLE_EQ(v, v_expected);
  EXPECT_DOUBLE_EQ(param, 0.5 * (1 - 0.01 * 0.1) -
                              hyper.step_size * m_expected / (std::sqrt(v_expected) / hyper.bias_correction2_sqrt + 1e-8));
}

TEST(Math, SgdUpdatesAsItsFormula) {
  double plain = 1.0;
  sgd_update<double>(plain, nullptr, 0.5, 0.1, 0.0, false, 0.0, 1.0, false, false);
  EXPECT_DOUBLE_EQ(plain, 1.0 - 0.1 * 0.5);
  double param = 1.0, buf = 0;
  sgd_update<double>(param, &buf, 0.5, 0.1, 0.01, true, 0.9, 1.0, true, true);  // first: buf = g
  const double g = 0.5 + 0.01 * 1.0;
  EXPECT_DOUBLE_EQ(buf, g);
  EXPECT_DOUBLE_EQ(param, 1.0 - 0.1 * (g + 0.9 * g));  // nesterov
  sgd_update<double>(param, &buf, 0.5, 0.1, 0.0, false, 0.9, 0.5, false, false);
  EXPECT_DOUBLE_EQ(buf, g * 0.9 + 0.5 * 0.5);
}

TEST(Math, GeluMatchesItsTanhForm) {
  const auto exp = [](double v) { return std::exp(v); };
  for (double x : {-3.0, -0.5, 0.0, 0.7, 4.0}) {
    const double u = kGeluScale * (x + kGeluCubic * x * x * x);
    EXPECT_NEAR(gelu_of<double>(x, exp), 0.5 * x * (1 + std::tanh(u)), 1e-15);
    const double h = 1e-6;
    const double numeric = (gelu_of<double>(x + h, exp) - gelu_of<double>(x - h, exp)) / (2 * h);
    EXPECT_NEAR(gelu_grad_of<double>(1.0, x, exp), numeric, 1e-8) << x;
  }
}

}  // namespace
}  // namespace remat::kernels
