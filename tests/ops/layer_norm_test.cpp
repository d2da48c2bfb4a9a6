// layer_norm: a hand case, the fused op against layer_norm_reference (values
// and gradients, serial and threaded), the same bits at any thread count,
// float64 gradient checks, float32 precision, and errors.
#include "ops/layer_norm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/gradcheck.h"
#include "tests/support/replay_counter.h"
#include "tests/support/thread_counts.h"

namespace remat {
namespace {

using testing::random_leaf;

using testing::expect_close;

// Two threads even where OMP_NUM_THREADS=1, restored at scope exit.
struct TwoThreads {
  int before = kernels::cpu::num_threads();
  TwoThreads() { kernels::cpu::set_num_threads(2); }
  ~TwoThreads() { kernels::cpu::set_num_threads(before); }
};

TEST(LayerNorm, HandComputed) {
  // x = (1, 3, 5, 7): mean 4, deviations (-3, -1, 1, 3), biased var (9+1+1+9)/4 = 5;
  // with eps = 4, rstd = 1/sqrt(9) = 1/3 and xhat = (-1, -1/3, 1/3, 1).
  // y = xhat * (1, 2, 3, 4) + (0.5, 0, -0.5, 1) = (-0.5, -2/3, 0.5, 5).
  const Tensor x = from_vector(std::vector<double>{1, 3, 5, 7}, {1, 4});
  const Tensor w = from_vector(std::vector<double>{1, 2, 3, 4}, {4});
  const Tensor b = from_vector(std::vector<double>{0.5, 0, -0.5, 1}, {4});
  const std::vector<double> y = layer_norm(x, w, b, 4.0).to_vector<double>();
  const std::vector<double> expected{-0.5, -2.0 / 3, 0.5, 5};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(y[i], expected[i], 1e-15) << i;
  // No weight, no bias: xhat itself.
  const std::vector<double> plain = layer_norm(x, {}, {}, 4.0).to_vector<double>();
  const std::vector<double> xhat{-1, -1.0 / 3, 1.0 / 3, 1};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(plain[i], xhat[i], 1e-15) << i;
  // The default eps 1e-5: deviations / sqrt(5.00001), in float32.
  const Tensor x32 = from_vector(std::vector<float>{1, 3, 5, 7}, {1, 4});
  const std::vector<float> f = layer_norm(x32, {}, {}).to_vector<float>();
  const double r = 1.0 / std::sqrt(5.00001);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(f[i], (2.0 * static_cast<double>(i) - 3) * r, 1e-6) << i;
}

TEST(LayerNorm, HandComputedGradients) {
  // sum(y) with the hand case above: dbias = 1, dweight = xhat, and with
  // g = w = (1, 2, 3, 4), mean(g) = 5/2, mean(g xhat) = (-1 - 2/3 + 1 + 4)/4 = 5/6,
  // dx = (1/3) (g - 5/2 - xhat 5/6) = (-2/9, -2/27, 2/27, 2/9).
  Tensor x = from_vector(std::vector<double>{1, 3, 5, 7}, {1, 4}).requires_grad_();
  Tensor w = from_vector(std::vector<double>{1, 2, 3, 4}, {4}).requires_grad_();
  Tensor b = from_vector(std::vector<double>{0.5, 0, -0.5, 1}, {4}).requires_grad_();
  sum(layer_norm(x, w, b, 4.0)).backward();
  const std::vector<double> dx = x.grad().to_vector<double>(), dw = w.grad().to_vector<double>();
  const std::vector<double> expected_dx{-2.0 / 9, -2.0 / 27, 2.0 / 27, 2.0 / 9}, expected_dw{-1, -1.0 / 3, 1.0 / 3, 1};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(dx[i], expected_dx[i], 1e-15) << i;
    EXPECT_NEAR(dw[i], expected_dw[i], 1e-15) << i;
  }
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{1, 1, 1, 1}));
}

// Fused against reference on the same leaves: values and all three gradients.
void expect_fused_layer_norm_matches_reference(const Shape& shape, double tol, uint64_t seed) {
  const int64_t c = shape.back();
  Tensor x = random_leaf(shape, -2, 3, seed), w = random_leaf({c}, 0.5, 1.5, seed + 1);
  Tensor b = random_leaf({c}, -1, 1, seed + 2);
  const Tensor dy = random_leaf(shape, -1, 1, seed + 3).detach();
  const Tensor y = layer_norm(x, w, b);
  const Tensor y_ref = layer_norm_reference(x, w, b);
  expect_close(y, y_ref, tol, "y");
  sum(y * dy).backward();
  const Tensor dx = x.grad(), dw = w.grad(), db = b.grad();
  x.set_grad(Tensor());
  w.set_grad(Tensor());
  b.set_grad(Tensor());
  sum(y_ref * dy).backward();
  expect_close(dx, x.grad(), tol, "dx");
  expect_close(dw, w.grad(), tol, "dweight");
  expect_close(db, b.grad(), tol, "dbias");
}

TEST(LayerNorm, FusedMatchesReference) { expect_fused_layer_norm_matches_reference({3, 5, 7}, 1e-12, 11); }

TEST(LayerNorm, FusedMatchesReferenceOnTheThreadedPath) {
  // 512 * 160 = 81920 elements: above 2 * kParallelGrain, so rows (and the
  // dweight/dbias partial sums) are split in blocks over two threads.
  const TwoThreads two;
  expect_fused_layer_norm_matches_reference({4, 128, 160}, 1e-11, 21);
}

// Every output and gradient at 1, 2 and 3 threads, bit for bit: dweight's
// and dbias's partial sums go by blocks of rows fixed by the shape, not by
// the threads (Note [Row blocks fixed by the shape]). 8 * 96 * 384 elements
// make 64 blocks (the most); 520 * 160 make 3, and rows that do not divide
// into them evenly. Each dtype, with and without weight.
TEST(LayerNorm, BitsDoNotDependOnTheThreadCount) {
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    for (const Shape& shape : {Shape{8, 96, 384}, Shape{520, 160}}) {
      Generator g(35);
      const int64_t c = shape.back();
      const Tensor x = uniform(shape, -2, 2, dtype, g), dy = uniform(shape, -1, 1, dtype, g);
      const Tensor w = uniform({c}, 0.5, 1.5, dtype, g), b = uniform({c}, -1, 1, dtype, g);
      for (const bool with_weight : {true, false}) {
        testing::expect_bits_independent_of_threads(
            std::string(dtype_name(dtype)) + " " + str(shape) + (with_weight ? " with weight" : " without weight"),
            [&] {
              Tensor xl = x.detach().requires_grad_(), wl = w.detach().requires_grad_(), bl = b.detach().requires_grad_();
              const Tensor y = layer_norm(xl, with_weight ? wl : Tensor(), bl);
              sum(y * dy).backward();
              Tensors outputs{y, xl.grad(), bl.grad()};
              if (with_weight) outputs.push_back(wl.grad());
              return outputs;
            });
      }
    }
  }
}

// A replay normalises with the statistics its first forward saved, in one
// pass (layer_norm_apply): it must give that forward's bits, with and
// without weight and bias, in float32 rows with a large mean (where a
// recomputed mean could round differently) and on the threaded path.
TEST(LayerNorm, AReplayGivesTheForwardsBits) {
  const TagPolicy recompute_all = [](const Node&) { return Tag::Recompute; };
  for (const int threads : {1, 2}) {
    const kernels::cpu::NumThreadsGuard guard(threads);
    Generator g(41);
    Tensor x = uniform({512, 160}, 999, 1001, DType::Float32, g).requires_grad_();
    const Tensor w = uniform({160}, 0.5, 1.5, DType::Float32, g), b = uniform({160}, -1, 1, DType::Float32, g);
    for (const bool with_weight : {true, false}) {
      for (const bool with_bias : {true, false}) {
        Tensor y;
        const auto replays = std::make_shared<ReplayCounter>();
        {
          RecomputeScope scope(recompute_all);
          GraphObserverScope observing(replays);
          y = layer_norm(x, with_weight ? w : Tensor(), with_bias ? b : Tensor());
        }
        ASSERT_EQ(y.grad_fn()->tag(), Tag::Recompute);
        const Tensor replayed = y.grad_fn()->rebuild();
        EXPECT_EQ(replays->flops, 4 * x.numel());  // normalising only: no statistics
        EXPECT_NE(replayed.storage(), y.storage());
        EXPECT_EQ(replayed.to_vector<float>(), y.to_vector<float>())
            << threads << " threads, weight " << with_weight << ", bias " << with_bias;
      }
    }
  }
}

TEST(LayerNorm, Gradients) {
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return layer_norm(v[0], v[1], v[2]); },
                         (Tensors{random_leaf({2, 3, 5}, -2, 2), random_leaf({5}, 0.5, 1.5, 2),
                                  random_leaf({5}, -1, 1, 3)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return layer_norm(v[0], v[1], Tensor()); },
                         (Tensors{random_leaf({4, 6}, -2, 2, 4), random_leaf({6}, 0.5, 1.5, 5)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return layer_norm(v[0], Tensor(), v[1], 0.1); },
                         (Tensors{random_leaf({4, 6}, -2, 2, 6), random_leaf({6}, -1, 1, 7)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return layer_norm(v[0], Tensor(), Tensor()); },
                         (Tensors{random_leaf({3, 4}, -2, 2, 8)}));
}

TEST(LayerNorm, GradientsThroughTransposedInput) {
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return layer_norm(transpose(v[0], 0, 1), v[1], v[2]); },
                         (Tensors{random_leaf({5, 3}, -2, 2, 9), random_leaf({5}, 0.5, 1.5, 10),
                                  random_leaf({5}, -1, 1, 11)}));
}

TEST(LayerNorm, GradientOnlyForWeight) {
  // x needs no gradient: dweight and dbias alone, equal to the reference's.
  const Tensor x = random_leaf({6, 8}, -2, 2, 12).detach();
  Tensor w = random_leaf({8}, 0.5, 1.5, 13), b = random_leaf({8}, -1, 1, 14);
  sum(layer_norm(x, w, b) * x).backward();
  const Tensor dw = w.grad(), db = b.grad();
  w.set_grad(Tensor());
  b.set_grad(Tensor());
  sum(layer_norm_reference(x, w, b) * x).backward();
  expect_close(dw, w.grad(), 1e-12, "dweight");
  expect_close(db, b.grad(), 1e-12, "dbias");
}

TEST(LayerNorm, Float32IsPreciseWithALargeMean) {
  // Rows 1000 + U(-0.1, 0.1): variance 0.0033, while a one-pass E[x^2] - E[x]^2
  // in float32 would be off by about 1000^2 * 6e-8 = 0.06, more than the variance
  // itself. The kernel's corrected two-pass (sums of x - first mean) keeps it;
  // what is left is the mean rounded
  // to float32 (half an ulp of 1000 = 3e-5) times rstd (about 17 to 20): under 1e-3.
  const Tensor x64 = add(uniform({64, 96}, -0.1, 0.1, DType::Float64), 1000.0);
  const Tensor x32 = to_dtype(x64, DType::Float32);
  const Tensor y64 = layer_norm(to_dtype(x32, DType::Float64), {}, {});  // the same inputs, in float64
  const Tensor y32 = layer_norm(x32, {}, {});
  expect_close(y32, y64, 1e-3, "y");
}

TEST(LayerNorm, Float32AgreesWithFloat64) {
  const Tensor x64 = uniform({2048, 256}, -3.0, 3.0, DType::Float64);
  const Tensor w64 = uniform({256}, 0.5, 1.5, DType::Float64), b64 = uniform({256}, -1.0, 1.0, DType::Float64);
  Tensor x32 = to_dtype(x64, DType::Float32), w32 = to_dtype(w64, DType::Float32), b32 = to_dtype(b64, DType::Float32);
  Tensor xd = to_dtype(x32, DType::Float64), wd = to_dtype(w32, DType::Float64), bd = to_dtype(b32, DType::Float64);
  for (Tensor* t : {&x32, &w32, &b32, &xd, &wd, &bd}) t->requires_grad_();
  const Tensor y32 = layer_norm(x32, w32, b32), yd = layer_norm(xd, wd, bd);
  expect_close(y32, yd, 1e-5, "y");
  sum(y32 * y32).backward();
  sum(yd * yd).backward();
  expect_close(x32.grad(), xd.grad(), 1e-4, "dx");
  // dweight and dbias sum 2048 rows of values up to ~10: relative 1e-6.
  expect_close(w32.grad(), wd.grad(), 1e-2, "dweight");
  expect_close(b32.grad(), bd.grad(), 1e-2, "dbias");
}

TEST(LayerNorm, KeepsShapeAndDtype) {
  const Tensor y = layer_norm(zeros({2, 3, 4}, DType::Float64), ones({4}, DType::Float64), zeros({4}, DType::Float64));
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(y.dtype(), DType::Float64);
  // A constant row normalises to 0 (var 0, eps keeps it finite), then gets the bias.
  const Tensor c = layer_norm(full({1, 3}, 7.0), {}, from_vector(std::vector<float>{1, 2, 3}, {3}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST(LayerNorm, WeightOfTheWrongShapeNamesBothShapes) {
  const std::string message = testing::error_of([] { layer_norm(zeros({2, 4}), zeros({3}), zeros({4})); });
  EXPECT_TRUE(testing::contains(message, "layer_norm")) << message;
  EXPECT_TRUE(testing::contains(message, "weight")) << message;
  EXPECT_TRUE(testing::contains(message, "(3)")) << message;
  EXPECT_TRUE(testing::contains(message, "(2, 4)")) << message;
  const std::string bias = testing::error_of([] { layer_norm(zeros({2, 4}), zeros({4}), zeros({2, 4})); });
  EXPECT_TRUE(testing::contains(bias, "bias")) << bias;
  const std::string dtype = testing::error_of([] { layer_norm(zeros({2, 4}), zeros({4}, DType::Float64), {}); });
  EXPECT_TRUE(testing::contains(dtype, "float64")) << dtype;
}

TEST(LayerNorm, EpsMustBePositive) {
  for (double eps : {0.0, -1e-5}) {
    const std::string message = testing::error_of([&] { layer_norm(zeros({2, 4}), {}, {}, eps); });
    EXPECT_TRUE(testing::contains(message, "eps")) << message;
    const std::string reference = testing::error_of([&] { layer_norm_reference(zeros({2, 4}), {}, {}, eps); });
    EXPECT_TRUE(testing::contains(reference, "eps")) << reference;
  }
}

TEST(LayerNorm, EmptyChannelsIsAnError) {
  const std::string message = testing::error_of([] { layer_norm(zeros({2, 0}), {}, {}); });
  EXPECT_TRUE(testing::contains(message, "(2, 0)")) << message;
}

}  // namespace
}  // namespace remat
