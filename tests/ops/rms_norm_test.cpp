// rms_norm: a hand case, the fused op against rms_norm_reference (values
// and gradients, float64 and float32, strided inputs, edge shapes), float64
// gradient checks, bits at one and two threads, a replay's bits, errors.
#include "ops/rms_norm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/gradcheck.h"
#include "tests/support/replay_counter.h"

namespace remat {
namespace {

using testing::random_leaf;

using testing::expect_close;

TEST(RmsNorm, HandComputed) {
  // x = (1, 3, 5, 7): mean(x^2) = (1 + 9 + 25 + 49) / 4 = 21; with eps = 4,
  // rstd = 1 / sqrt(25) = 1/5, y = x / 5 * (1, 2, 3, 4) = (0.2, 1.2, 3, 5.6).
  const Tensor x = from_vector(std::vector<double>{1, 3, 5, 7}, {1, 4});
  const Tensor w = from_vector(std::vector<double>{1, 2, 3, 4}, {4});
  const std::vector<double> y = rms_norm(x, w, 4.0).to_vector<double>();
  const std::vector<double> expected{0.2, 1.2, 3, 5.6};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(y[i], expected[i], 1e-15) << i;
  const std::vector<double> plain = rms_norm(x, {}, 4.0).to_vector<double>();
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(plain[i], (2.0 * static_cast<double>(i) + 1) / 5, 1e-15) << i;
  // The default eps 1e-6, in float32: x / sqrt(21.000001).
  const Tensor x32 = from_vector(std::vector<float>{1, 3, 5, 7}, {1, 4});
  const std::vector<float> f = rms_norm(x32, {}).to_vector<float>();
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(f[i], (2.0 * static_cast<double>(i) + 1) / std::sqrt(21.000001), 1e-6);
}

TEST(RmsNorm, HandComputedGradients) {
  // sum(y) with the hand case above: g = w = (1, 2, 3, 4), xhat = x / 5,
  // mean(g xhat) = (0.2 + 1.2 + 3 + 5.6) / 4 = 2.5,
  // dx = (1/5) (g - 2.5 xhat) = (1/5) (0.5, 0.5, 0.5, 0.5) = 0.1 each; dweight = xhat.
  Tensor x = from_vector(std::vector<double>{1, 3, 5, 7}, {1, 4}).requires_grad_();
  Tensor w = from_vector(std::vector<double>{1, 2, 3, 4}, {4}).requires_grad_();
  sum(rms_norm(x, w, 4.0)).backward();
  const std::vector<double> dx = x.grad().to_vector<double>(), dw = w.grad().to_vector<double>();
  const std::vector<double> expected_dw{0.2, 0.6, 1, 1.4};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(dx[i], 0.1, 1e-15) << i;
    EXPECT_NEAR(dw[i], expected_dw[i], 1e-15) << i;
  }
}

// Fused against reference on the same leaves (x given through `view`):
// values and both gradients.
void expect_fused_rms_norm_matches_reference(const Tensor& x, const Tensor& w, double tol,
                                    const std::function<Tensor(const Tensor&)>& view) {
  const Tensor y = rms_norm(view(x), w);
  const Tensor y_ref = rms_norm_reference(view(x), w);
  expect_close(y, y_ref, tol, "y");
  const Tensor dy = uniform(y.shape(), -1, 1, y.dtype());
  sum(y * dy).backward();
  const Tensor dx = x.grad(), dw = w.defined() ? w.grad() : Tensor();
  x.set_grad(Tensor());
  if (w.defined()) w.set_grad(Tensor());
  sum(y_ref * dy).backward();
  expect_close(dx, x.grad(), tol, "dx");
  if (w.defined()) expect_close(dw, w.grad(), tol, "dweight");
}

using testing::kAsIs;

TEST(RmsNorm, FusedMatchesReferenceInFloat64) {
  for (const Shape& shape : {Shape{3, 5, 7}, Shape{4, 1}, Shape{1, 9}, Shape{5}, Shape{2, 1, 33}}) {
    SCOPED_TRACE(str(shape));
    const int64_t c = shape.back();
    expect_fused_rms_norm_matches_reference(random_leaf(shape, -2, 3, 11), random_leaf({c}, 0.5, 1.5, 12), 1e-12, kAsIs);
    expect_fused_rms_norm_matches_reference(random_leaf(shape, -2, 3, 13), Tensor(), 1e-12, kAsIs);
  }
}

TEST(RmsNorm, FusedMatchesReferenceInFloat32) {
  Generator g(5);
  Tensor x = uniform({37, 96}, -2, 2, DType::Float32, g).requires_grad_();
  Tensor w = uniform({96}, 0.5, 1.5, DType::Float32, g).requires_grad_();
  expect_fused_rms_norm_matches_reference(x, w, 1e-5, kAsIs);
}

TEST(RmsNorm, FusedMatchesReferenceOnStridedInput) {
  // x (7, 5) read as its transpose (5, 7): a copy on the way in, the gradient
  // transposed back.
  expect_fused_rms_norm_matches_reference(random_leaf({7, 5}, -2, 2, 21), random_leaf({7}, 0.5, 1.5, 22), 1e-12,
                                 [](const Tensor& t) { return transpose(t, 0, 1); });
}

TEST(RmsNorm, FusedMatchesReferenceOnTheThreadedPath) {
  // 512 * 160 = 81920 elements: above 2 * kParallelGrain, so rows (and
  // dweight's block partials) are split.
  const kernels::cpu::NumThreadsGuard two(2);
  expect_fused_rms_norm_matches_reference(random_leaf({4, 128, 160}, -2, 3, 31), random_leaf({160}, 0.5, 1.5, 32), 1e-11,
                                 kAsIs);
}

// Every output and gradient at one thread and at two, compared bit for bit
// (dweight's blocks are the shape's, not the threads').
template <class T>
void expect_rms_norm_bits_independent_of_threads(DType dtype) {
  Generator g(41);
  const Tensor x = uniform({8, 256, 384}, -2, 2, dtype, g), w = uniform({384}, 0.5, 1.5, dtype, g);
  const Tensor dy = uniform({8, 256, 384}, -1, 1, dtype, g);
  std::vector<std::vector<T>> runs[2];
  for (const int threads : {1, 2}) {
    const kernels::cpu::NumThreadsGuard guard(threads);
    Tensor xl = x.detach().requires_grad_(), wl = w.detach().requires_grad_();
    const Tensor y = rms_norm(xl, wl);
    sum(y * dy).backward();
    runs[threads - 1] = {y.to_vector<T>(), xl.grad().to_vector<T>(), wl.grad().to_vector<T>()};
  }
  const char* names[] = {"y", "dx", "dweight"};
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(runs[0][k], runs[1][k]) << names[k] << " " << dtype_name(dtype);
}

TEST(RmsNorm, BitsDoNotDependOnTheThreadCount) {
  expect_rms_norm_bits_independent_of_threads<float>(DType::Float32);
  expect_rms_norm_bits_independent_of_threads<double>(DType::Float64);
}

// A replay scales with the rstd its first forward saved (rms_norm_apply):
// it must give that forward's bits, with and without weight, serial and
// threaded.
TEST(RmsNorm, AReplayGivesTheForwardsBits) {
  const TagPolicy recompute_all = [](const Node&) { return Tag::Recompute; };
  for (const int threads : {1, 2}) {
    const kernels::cpu::NumThreadsGuard guard(threads);
    Generator g(43);
    Tensor x = uniform({512, 160}, -3, 3, DType::Float32, g).requires_grad_();
    const Tensor w = uniform({160}, 0.5, 1.5, DType::Float32, g);
    for (const bool with_weight : {true, false}) {
      Tensor y;
      const auto replays = std::make_shared<ReplayCounter>();
      {
        RecomputeScope scope(recompute_all);
        GraphObserverScope observing(replays);
        y = rms_norm(x, with_weight ? w : Tensor());
      }
      ASSERT_EQ(y.grad_fn()->tag(), Tag::Recompute);
      const Tensor replayed = y.grad_fn()->rebuild();
      EXPECT_EQ(replays->flops, 2 * x.numel());  // scaling only: no sum of squares
      EXPECT_NE(replayed.storage(), y.storage());
      EXPECT_EQ(replayed.to_vector<float>(), y.to_vector<float>()) << threads << " threads, weight " << with_weight;
    }
  }
}

// A Llama-like chain (rms_norm, rotary on its heads, swiglu) with every
// node tagged Recompute: each dropped output is replayed in backward, and
// the gradients are keep-all's, bit for bit.
TEST(RmsNorm, UnderRecomputeTheGradientsAreKeepAlls) {
  const TagPolicy recompute_all = [](const Node&) { return Tag::Recompute; };
  const TagPolicy keep_all = [](const Node&) { return Tag::Keep; };
  Generator g(47);
  const Tensor x = uniform({2, 6, 32}, -2, 2, DType::Float32, g), w = uniform({32}, 0.5, 1.5, DType::Float32, g);
  std::vector<float> grads[2][2];
  for (const bool recompute : {false, true}) {
    Tensor xl = x.detach().requires_grad_(), wl = w.detach().requires_grad_();
    Tensor loss;
    const auto replays = std::make_shared<ReplayCounter>();
    {
      RecomputeScope scope(recompute ? recompute_all : keep_all);
      GraphObserverScope observing(replays);
      const Tensor h = rms_norm(xl, wl);                                     // (B, T, C)
      const Tensor q = rotary(transpose(view(h, {2, 6, 4, 8}), 1, 2));       // (B, H, T, D)
      const Tensor m = swiglu(transpose(q, 1, 2), view(h, {2, 6, 4, 8}));   // (B, T, H, D)
      loss = sum(m * m);
    }
    loss.backward();
    EXPECT_EQ(replays->nodes > 0, recompute);
    grads[recompute][0] = xl.grad().to_vector<float>();
    grads[recompute][1] = wl.grad().to_vector<float>();
  }
  EXPECT_EQ(grads[1][0], grads[0][0]) << "dx";
  EXPECT_EQ(grads[1][1], grads[0][1]) << "dweight";
}

TEST(RmsNorm, Gradients) {
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return rms_norm(v[0], v[1]); },
                         (Tensors{random_leaf({2, 3, 5}, -2, 2), random_leaf({5}, 0.5, 1.5, 2)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return rms_norm(v[0], Tensor(), 0.1); },
                         (Tensors{random_leaf({4, 6}, -2, 2, 3)}));
  // Edge shapes: one channel (y = x / sqrt(x^2 + eps) w), one row, odd sizes.
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return rms_norm(v[0], v[1], 0.5); },
                         (Tensors{random_leaf({5, 1}, -2, 2, 4), random_leaf({1}, 0.5, 1.5, 5)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return rms_norm(v[0], v[1]); },
                         (Tensors{random_leaf({1, 1, 7}, -2, 2, 6), random_leaf({7}, 0.5, 1.5, 7)}));
}

TEST(RmsNorm, GradientsThroughTransposedInput) {
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return rms_norm(transpose(v[0], 0, 1), v[1]); },
                         (Tensors{random_leaf({5, 3}, -2, 2, 9), random_leaf({5}, 0.5, 1.5, 10)}));
}

TEST(RmsNorm, GradientOnlyForWeight) {
  // x needs no gradient: dweight alone, equal to the reference's.
  const Tensor x = random_leaf({6, 8}, -2, 2, 12).detach();
  Tensor w = random_leaf({8}, 0.5, 1.5, 13);
  sum(rms_norm(x, w) * x).backward();
  const Tensor dw = w.grad();
  w.set_grad(Tensor());
  sum(rms_norm_reference(x, w) * x).backward();
  expect_close(dw, w.grad(), 1e-12, "dweight");
}

TEST(RmsNorm, Float32AgreesWithFloat64) {
  const Tensor x64 = uniform({2048, 256}, -3.0, 3.0, DType::Float64);
  const Tensor w64 = uniform({256}, 0.5, 1.5, DType::Float64);
  Tensor x32 = to_dtype(x64, DType::Float32), w32 = to_dtype(w64, DType::Float32);
  Tensor xd = to_dtype(x32, DType::Float64), wd = to_dtype(w32, DType::Float64);
  for (Tensor* t : {&x32, &w32, &xd, &wd}) t->requires_grad_();
  const Tensor y32 = rms_norm(x32, w32), yd = rms_norm(xd, wd);
  expect_close(y32, yd, 1e-5, "y");
  sum(y32 * y32).backward();
  sum(yd * yd).backward();
  expect_close(x32.grad(), xd.grad(), 1e-4, "dx");
  expect_close(w32.grad(), wd.grad(), 1e-2, "dweight");  // sums of 2048 rows of values up to ~10
}

TEST(RmsNorm, KeepsShapeAndDtypeAndAZeroRowStaysZero) {
  const Tensor y = rms_norm(zeros({2, 3, 4}, DType::Float64), ones({4}, DType::Float64));
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(y.dtype(), DType::Float64);
  EXPECT_EQ(y.to_vector<double>(), std::vector<double>(24, 0.0));  // eps keeps 0 * rstd finite
}

TEST(RmsNorm, ErrorsNameTheShapesAndDtypes) {
  const std::string shape = testing::error_of([] { rms_norm(zeros({2, 4}), zeros({3})); });
  EXPECT_TRUE(testing::contains(shape, "rms_norm")) << shape;
  EXPECT_TRUE(testing::contains(shape, "weight")) << shape;
  EXPECT_TRUE(testing::contains(shape, "(3)")) << shape;
  EXPECT_TRUE(testing::contains(shape, "(2, 4)")) << shape;
  const std::string dtype = testing::error_of([] { rms_norm(zeros({2, 4}), zeros({4}, DType::Float64)); });
  EXPECT_TRUE(testing::contains(dtype, "float64")) << dtype;
  EXPECT_TRUE(testing::contains(dtype, "float32")) << dtype;
  const std::string empty = testing::error_of([] { rms_norm(zeros({2, 0}), {}); });
  EXPECT_TRUE(testing::contains(empty, "(2, 0)")) << empty;
  for (double eps : {0.0, -1e-6}) {
    const std::string message = testing::error_of([&] { rms_norm(zeros({2, 4}), {}, eps); });
    EXPECT_TRUE(testing::contains(message, "eps")) << message;
    const std::string reference = testing::error_of([&] { rms_norm_reference(zeros({2, 4}), {}, eps); });
    EXPECT_TRUE(testing::contains(reference, "eps")) << reference;
  }
}

}  // namespace
}  // namespace remat
