// clip_grad_norm: the total norm, the scaling factor of PyTorch's
// clip_grad_norm_, parameters without grads, and strided gradients.
#include "optim/clip.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ops/ops.h"

namespace remat::optim {
namespace {

Tensor leaf_with_grad(const std::vector<double>& grad) {
  Tensor t = zeros({static_cast<int64_t>(grad.size())}, DType::Float64);
  t.requires_grad_();
  t.set_grad(from_vector(grad, {static_cast<int64_t>(grad.size())}));
  return t;
}

TEST(ClipGradNorm, ScalesWhenAboveMaxNorm) {
  // |(3, 4, 12)| = 13
  const Tensor a = leaf_with_grad({3, 4}), b = leaf_with_grad({12});
  const double norm = clip_grad_norm({a, b}, 6.5);
  EXPECT_DOUBLE_EQ(norm, 13.0);  // before clipping
  const double coef = 6.5 / (13.0 + 1e-6);
  EXPECT_DOUBLE_EQ(a.grad().to_vector<double>()[0], 3 * coef);
  EXPECT_DOUBLE_EQ(a.grad().to_vector<double>()[1], 4 * coef);
  EXPECT_DOUBLE_EQ(b.grad().item<double>(), 12 * coef);
  EXPECT_NEAR(clip_grad_norm({a, b}, 100.0), 6.5, 1e-6);  // the new norm, left alone
}

TEST(ClipGradNorm, LeavesSmallGradientsAlone) {
  const Tensor a = leaf_with_grad({3, 4});
  EXPECT_DOUBLE_EQ(clip_grad_norm({a}, 5.0 + 1e-3), 5.0);
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{3, 4}));
}

TEST(ClipGradNorm, SkipsParametersWithoutGrad) {
  const Tensor a = leaf_with_grad({6, 8});
  Tensor b = zeros({3}, DType::Float64);
  b.requires_grad_();
  EXPECT_DOUBLE_EQ(clip_grad_norm({a, b}, 1.0), 10.0);
  EXPECT_FALSE(b.grad().defined());
  EXPECT_NEAR(a.grad().to_vector<double>()[0], 0.6, 1e-7);
}

TEST(ClipGradNorm, Float32AndStridedGradients) {
  Tensor p = zeros({2, 2});
  p.requires_grad_();
  // A transposed view as the gradient: clip makes it contiguous first.
  const Tensor g = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  p.set_grad(transpose(g, 0, 1));
  const double norm = clip_grad_norm({p}, 1.0);
  EXPECT_NEAR(norm, std::sqrt(30.0), 1e-6);
  EXPECT_TRUE(p.grad().is_contiguous());
  const std::vector<float> got = p.grad().to_vector<float>();
  const double coef = 1.0 / (std::sqrt(30.0) + 1e-6);
  EXPECT_NEAR(got[0], 1 * coef, 1e-6);
  EXPECT_NEAR(got[1], 3 * coef, 1e-6);  // transposed order
  EXPECT_NEAR(got[3], 4 * coef, 1e-6);
}

TEST(ClipGradNorm, NegativeMaxNormIsAnError) {
  const Tensor a = leaf_with_grad({1});
  EXPECT_THROW(clip_grad_norm({a}, -1.0), Error);
}

}  // namespace
}  // namespace remat::optim
