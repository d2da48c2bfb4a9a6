// fast_exp, clamped_exp and fast_tanh against the double-precision library,
// in units in the last place of the float result, over their whole useful
// range; and the kernels' vector lanes against the scalar functions.
#include "kernels/cpu/fast_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/unary.h"
#include "kernels/unary_math.h"

namespace remat::kernels::cpu {
namespace {

// |approx - exact| in ulps of the float nearest to exact.
double ulps(float approx, double exact) {
  const float nearest = static_cast<float>(exact);
  const float next = std::nextafter(nearest, std::numeric_limits<float>::infinity());
  const double ulp = static_cast<double>(next) - static_cast<double>(nearest);
  return std::abs(static_cast<double>(approx) - exact) / ulp;
}

template <class F, class G>
double worst_ulps(F approx, G exact, float low, float high, float step) {
  double worst = 0;
  for (float x = low; x <= high; x += step) worst = std::max(worst, ulps(approx(x), exact(static_cast<double>(x))));
  return worst;
}

TEST(FastMath, ExpIsWithinTwoUlps) {
  const auto approx = [](float x) { return fast_exp(x); };
  const auto exact = [](double x) { return std::exp(x); };
  EXPECT_LE(worst_ulps(approx, exact, -87.0f, 88.5f, 1e-3f), 2.0);
  EXPECT_LE(worst_ulps(approx, exact, -1.0f, 1.0f, 1e-5f), 2.0);
}

TEST(FastMath, ExpAtTheLimits) {
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
  EXPECT_EQ(fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(fast_exp(-200.0f), 0.0f);
  EXPECT_EQ(fast_exp(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fast_exp(89.0f), std::numeric_limits<float>::infinity());  // e^89 > FLT_MAX
  EXPECT_GT(fast_exp(88.7f), 3.0e38f);                                  // still finite
  EXPECT_TRUE(std::isnan(fast_exp(std::numeric_limits<float>::quiet_NaN())));
  // Subnormal results: e^-100 = 3.72e-44.
  EXPECT_NEAR(fast_exp(-100.0f), 3.720076e-44f, 2e-45f);
}

TEST(FastMath, TanhIsWithinThreeUlps) {
  const auto approx = [](float x) { return fast_tanh(x); };
  const auto exact = [](double x) { return std::tanh(x); };
  EXPECT_LE(worst_ulps(approx, exact, -10.0f, 10.0f, 1e-4f), 3.0);
  EXPECT_LE(worst_ulps(approx, exact, -1e-3f, 1e-3f, 1e-7f), 3.0);
}

TEST(FastMath, TanhAtTheLimits) {
  EXPECT_EQ(fast_tanh(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(fast_tanh(-0.0f)));
  EXPECT_EQ(fast_tanh(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(fast_tanh(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_EQ(fast_tanh(50.0f), 1.0f);
  EXPECT_TRUE(std::isnan(fast_tanh(std::numeric_limits<float>::quiet_NaN())));
}

// The kernels are compiled vectorised (-fno-trapping-math); their lanes must
// give what the scalar functions give, special values included.
TEST(FastMath, VectorisedKernelsAgreeWithTheScalarFunctions) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, -0.0f, 0.0f, 50.0f, -200.0f, 88.9f};
  for (int i = 0; i < 1000; ++i) x.push_back(-12.0f + 0.024f * static_cast<float>(i));
  std::vector<float> out(x.size());
  unary_forward<Tanh>(out.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float expected = fast_tanh(x[i]);
    if (std::isnan(expected)) EXPECT_TRUE(std::isnan(out[i])) << i;
    else EXPECT_EQ(out[i], expected) << "x = " << x[i];
  }
  unary_forward<Exp>(out.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float expected = fast_exp(x[i]);
    if (std::isnan(expected)) EXPECT_TRUE(std::isnan(out[i])) << i;
    else EXPECT_EQ(out[i], expected) << "x = " << x[i];
  }
}

TEST(FastMath, ClampedExpIsWithinTwoUlpsInsideItsRange) {
  const auto approx = [](float x) { return clamped_exp(x); };
  const auto exact = [](double x) { return std::exp(x); };
  EXPECT_LE(worst_ulps(approx, exact, -87.0f, 87.0f, 1e-3f), 2.0);
  EXPECT_LE(worst_ulps(approx, exact, -1.0f, 1.0f, 1e-5f), 2.0);
}

// Through Float32x8 lanes read from memory, as GELU runs it (a float call
// with a constant argument may be folded by the compiler instead).
std::vector<float> clamped_exp_lanes(const std::vector<float>& x) {
  std::vector<float> out;
  for (size_t i = 0; i < x.size(); i += 8) {
    Float32x8 v{};
    std::memcpy(&v, x.data() + i, std::min<size_t>(8, x.size() - i) * sizeof(float));
    const Float32x8 e = clamped_exp(v);
    for (size_t j = 0; j < 8 && i + j < x.size(); ++j) out.push_back(e[j]);
  }
  return out;
}

TEST(FastMath, ClampedExpClampsAndKeepsNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> e =
      clamped_exp_lanes({-inf, -200.0f, -87.0f, 88.3f, 88.4f, 200.0f, inf, std::numeric_limits<float>::quiet_NaN()});
  EXPECT_EQ(e[0], e[2]);  // clamped to e^-87 below -87
  EXPECT_EQ(e[1], e[2]);
  EXPECT_GE(e[2], std::numeric_limits<float>::min());  // normal, never subnormal
  EXPECT_EQ(1.0f / (1.0f + e[0]), 1.0f);               // so a gate there is exactly 1
  EXPECT_NEAR(e[3] / std::exp(static_cast<double>(88.3f)), 1.0, 1e-6);  // e^x up to 88.37
  EXPECT_EQ(e[4], inf);  // +inf above: a gate there is exactly 0
  EXPECT_EQ(e[5], inf);
  EXPECT_EQ(e[6], inf);
  EXPECT_TRUE(std::isnan(e[7]));
}

TEST(FastMath, GeluAtTheExtremes) {
  // GELU(-inf) is NaN, as in float64 and PyTorch (-inf times a gate of 0);
  // a large negative x gives -0, a large positive x itself.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {-inf, -1e30f, -100.0f, 100.0f, 1e30f, inf};
  std::vector<float> out(x.size());
  unary_forward<Gelu>(out.data(), x.data(), static_cast<int64_t>(x.size()));
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_TRUE(std::signbit(out[1]));
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 100.0f);
  EXPECT_EQ(out[4], 1e30f);
  EXPECT_EQ(out[5], inf);
  double reference = 0;
  unary_forward<Gelu>(&reference, std::vector<double>{-inf}.data(), 1);
  EXPECT_TRUE(std::isnan(reference));
}

// In place (out the input itself), and split over two threads in chunks of
// kParallelGrain, GELU gives the bits of one thread writing elsewhere.
TEST(FastMath, GeluInPlaceAndOnTwoThreadsGivesTheSameBits) {
  const int64_t n = 3 * kParallelGrain + 37;
  std::vector<float> x(static_cast<size_t>(n)), dout(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    x[static_cast<size_t>(i)] = -6.0f + 12.0f * static_cast<float>(i % 1000) / 1000.0f;
    dout[static_cast<size_t>(i)] = 1.0f - static_cast<float>(i % 7) / 7.0f;
  }
  std::vector<float> out(x.size()), dx(x.size());
  {
    NumThreadsGuard one(1);
    unary_forward<Gelu>(out.data(), x.data(), n);
    unary_backward<Gelu>(dx.data(), dout.data(), x.data(), n);
  }
  std::vector<float> in_place = x, dx_in_place = dout;
  unary_forward<Gelu>(in_place.data(), in_place.data(), n);
  unary_backward<Gelu>(dx_in_place.data(), dx_in_place.data(), x.data(), n);
  EXPECT_EQ(in_place, out);
  EXPECT_EQ(dx_in_place, dx);
  std::vector<float> out2(x.size()), dx2(x.size());
  {
    NumThreadsGuard two(2);
    unary_forward<Gelu>(out2.data(), x.data(), n);
    unary_backward<Gelu>(dx2.data(), dout.data(), x.data(), n);
  }
  EXPECT_EQ(out2, out);
  EXPECT_EQ(dx2, dx);
}

// Every unary math, on lanes (GELU's, SiLU's: four Float32x8 vectors per
// step, the rest one padded vector at a time) or one element a step
// (vectorised, with a scalar tail): every element must get the bits a lone
// element gets.
template <class Math>
void expect_the_same_bits_wherever_it_sits() {
  SCOPED_TRACE(Math::kName);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, -0.0f, 0.0f, 50.0f, -200.0f, -9.6f};
  for (int i = 0; i < 1001; ++i) x.push_back(-12.0f + 0.024f * static_cast<float>(i));
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> dout(x.size());
  for (size_t i = 0; i < x.size(); ++i) dout[i] = 0.5f + 0.001f * static_cast<float>(i);
  std::vector<float> out(x.size()), dx(x.size());
  unary_forward<Math>(out.data(), x.data(), n);
  unary_backward<Math>(dx.data(), dout.data(), x.data(), n);
  for (size_t i = 0; i < x.size(); ++i) {
    float one = 0, done = 0;
    unary_forward<Math>(&one, &x[i], 1);
    unary_backward<Math>(&done, &dout[i], &x[i], 1);
    if (std::isnan(one)) EXPECT_TRUE(std::isnan(out[i])) << i;
    else EXPECT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(one)) << "x = " << x[i];
    if (std::isnan(done)) EXPECT_TRUE(std::isnan(dx[i])) << i;
    else EXPECT_EQ(std::bit_cast<uint32_t>(dx[i]), std::bit_cast<uint32_t>(done)) << "x = " << x[i];
  }
}

TEST(FastMath, EveryUnaryMathGivesAnElementTheSameBitsWhereverItSits) {
#define REMAT_SAME_BITS(Math) expect_the_same_bits_wherever_it_sits<Math>();
  REMAT_UNARY_MATHS(REMAT_SAME_BITS)
#undef REMAT_SAME_BITS
}

TEST(FastMath, DoubleUsesTheLibrary) {
  EXPECT_EQ(fast_exp(0.7), std::exp(0.7));
  EXPECT_EQ(fast_tanh(0.7), std::tanh(0.7));
  EXPECT_EQ(clamped_exp(0.7), std::exp(0.7));
}

}  // namespace
}  // namespace remat::kernels::cpu
