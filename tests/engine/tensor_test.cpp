// Tensor metadata, element access, factories and the random generator.
#include "engine/tensor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ops/ops.h"

namespace remat {
namespace {

TEST(Tensor, ShapeStridesAndContiguity) {
  Tensor t({2, 3, 4}, DType::Float32);
  EXPECT_EQ(t.strides(), (Strides{12, 4, 1}));
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_FALSE(transpose(t, 0, 2).is_contiguous());
  EXPECT_EQ(t.str(), "float32 (2, 3, 4) cpu");
}

TEST(Tensor, ToVectorReadsStridedViews) {
  const Tensor t = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(transpose(t, 0, 1).to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(contiguous(transpose(t, 0, 1)).to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(Tensor, WrongDtypeAccessNamesBoth) {
  const Tensor t = zeros({2});
  try {
    t.data<double>();
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("float32"), std::string::npos) << m;
    EXPECT_NE(m.find("float64"), std::string::npos) << m;
  }
}

TEST(Tensor, ItemNeedsOneElement) {
  EXPECT_EQ(full({1, 1}, 2.5).item<float>(), 2.5f);
  EXPECT_THROW(zeros({2}).item<float>(), Error);
}

TEST(Tensor, FactoriesFillAsAsked) {
  EXPECT_EQ(ones({3}, DType::Float64).to_vector<double>(), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(arange(4).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_THROW(from_vector(std::vector<float>{1, 2, 3}, {2, 2}), Error);
  EXPECT_THROW(Tensor({-1, 2}, DType::Float32), Error);
}

TEST(Tensor, BfloatIsDeclaredButHasNoCpuKernel) {
  Tensor t({4}, DType::BFloat16);
  EXPECT_EQ(t.nbytes(), 8u);
  EXPECT_THROW(relu(t), Error);
}

TEST(Rng, PhiloxIsAPureFunctionOfSeedAndOffset) {
  Generator a(42), b(42), c(43);
  const Tensor x = uniform({1000}, 0, 1, DType::Float32, a);
  const Tensor y = uniform({1000}, 0, 1, DType::Float32, b);
  const Tensor z = uniform({1000}, 0, 1, DType::Float32, c);
  EXPECT_EQ(x.to_vector<float>(), y.to_vector<float>());
  EXPECT_NE(x.to_vector<float>(), z.to_vector<float>());
  EXPECT_EQ(a.offset(), 250u);  // one counter gives four float32 numbers
  // The next draw continues from the offset: different numbers.
  EXPECT_NE(uniform({1000}, 0, 1, DType::Float32, a).to_vector<float>(), x.to_vector<float>());
}

TEST(Rng, MomentsOfUniformAndNormal) {
  Generator g(7);
  const std::vector<double> u = uniform({200000}, -1, 3, DType::Float64, g).to_vector<double>();
  const std::vector<double> n = normal({200000}, 2, 0.5, DType::Float64, g).to_vector<double>();
  auto moments = [](const std::vector<double>& v) {
    double s = 0, s2 = 0;
    for (double x : v) s += x, s2 += x * x;
    const double mean = s / v.size();
    return std::pair{mean, std::sqrt(s2 / v.size() - mean * mean)};
  };
  auto [um, us] = moments(u);
  EXPECT_NEAR(um, 1.0, 0.01);
  EXPECT_NEAR(us, 4 / std::sqrt(12.0), 0.01);
  for (double x : u) ASSERT_TRUE(x >= -1 && x < 3);
  auto [nm, ns] = moments(n);
  EXPECT_NEAR(nm, 2.0, 0.01);
  EXPECT_NEAR(ns, 0.5, 0.01);
}

}  // namespace
}  // namespace remat
