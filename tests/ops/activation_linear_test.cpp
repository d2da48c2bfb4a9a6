// gelu_affine and swiglu_linear: a hand case; on the CPU the bits of the
// unfused pair (affine(gelu(h)), linear(swiglu(gate, up))), values and
// every gradient, float32 and float64, with and without a bias, strided
// inputs, at one and two threads (and the same bits at both); float64
// gradient checks; only some inputs wanting gradients; the node dropped and
// replayed; what the node saves (never the activation) and its traits;
// errors.
#include "ops/activation_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/gradcheck.h"

namespace remat {
namespace {

using testing::random_leaf;

double gelu_of(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

TEST(GeluAffine, HandComputed) {
  // y = gelu(h0) w0 + gelu(h1) w1 + b for h (1, 2), W (2, 1).
  Tensor h = from_vector(std::vector<double>{0.5, -1.5}, {1, 2}).requires_grad_();
  Tensor w = from_vector(std::vector<double>{2, 3}, {2, 1}).requires_grad_();
  Tensor b = from_vector(std::vector<double>{0.25}, {1}).requires_grad_();
  const Tensor y = gelu_affine(h, w, b);
  EXPECT_NEAR(y.item<double>(), 2 * gelu_of(0.5) + 3 * gelu_of(-1.5) + 0.25, 1e-15);
  sum(y).backward();
  // dW = gelu(h)^T, db = 1, dh_i = w_i gelu'(h_i) (a central difference of gelu_of).
  const auto slope = [](double x) { return (gelu_of(x + 1e-6) - gelu_of(x - 1e-6)) / 2e-6; };
  const std::vector<double> dw = w.grad().to_vector<double>(), dh = h.grad().to_vector<double>();
  EXPECT_NEAR(dw[0], gelu_of(0.5), 1e-15);
  EXPECT_NEAR(dw[1], gelu_of(-1.5), 1e-15);
  EXPECT_EQ(b.grad().item<double>(), 1.0);
  EXPECT_NEAR(dh[0], 2 * slope(0.5), 1e-8);
  EXPECT_NEAR(dh[1], 3 * slope(-1.5), 1e-8);
}

// The fused op and the unfused pair, each a function of the leaves.
struct Case {
  std::function<Tensor(const Tensors&)> fused, unfused;
  std::vector<Shape> shapes;  // of the leaves
  std::vector<double> ranges;  // each leaf's values in [-range, range)
};

Case gelu_case(const Shape& h, int64_t out, bool bias, bool transposed_h) {
  const int64_t in = h.back();
  const auto view = [transposed_h](const Tensor& t) { return transposed_h ? transpose(t, 0, 1) : t; };
  Shape stored = h;
  if (transposed_h) std::swap(stored[0], stored[1]);
  Case c{.shapes = {stored, {in, out}}, .ranges = {4, 0.5}};
  if (bias) {
    c.shapes.push_back({out});
    c.ranges.push_back(1);
  }
  c.fused = [=](const Tensors& v) { return gelu_affine(view(v[0]), v[1], bias ? v[2] : Tensor()); };
  c.unfused = [=](const Tensors& v) { return affine(gelu(view(v[0])), v[1], bias ? v[2] : Tensor()); };
  return c;
}

Case swiglu_case(const Shape& x, int64_t out, bool bias) {
  const int64_t in = x.back();
  Case c{.shapes = {x, x, {out, in}}, .ranges = {6, 2, 0.5}};
  if (bias) {
    c.shapes.push_back({out});
    c.ranges.push_back(1);
  }
  c.fused = [=](const Tensors& v) { return swiglu_linear(v[0], v[1], v[2], bias ? v[3] : Tensor()); };
  c.unfused = [=](const Tensors& v) { return linear(swiglu(v[0], v[1]), v[2], bias ? v[3] : Tensor()); };
  return c;
}

struct Bits {
  std::vector<double> y;
  std::vector<std::vector<double>> grads;  // empty where a leaf wants none
  bool operator==(const Bits&) const = default;
};

// Values and gradients of sum(f(leaves) * dy), on leaves drawn alike every
// time; `wants[i]` says whether leaf i requires grad.
Bits run_bits(const std::function<Tensor(const Tensors&)>& f, const Case& c, DType dtype, const std::vector<bool>& wants) {
  Generator g(11);
  Tensors leaves;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    Tensor t = uniform(c.shapes[i], -c.ranges[i], c.ranges[i], dtype, g);
    leaves.push_back(wants[i] ? t.requires_grad_() : t);
  }
  const Tensor y = f(leaves);
  const Tensor dy = uniform(y.shape(), -1, 1, dtype, g);
  sum(y * dy).backward();
  Bits bits{y.to_vector<double>(), {}};
  for (const Tensor& leaf : leaves) {
    bits.grads.push_back(leaf.requires_grad() ? leaf.grad().to_vector<double>() : std::vector<double>());
  }
  return bits;
}

// Fused equals unfused bit for bit, at 1 and 2 threads, and the bits are
// the same at both.
void expect_bits_of_the_pair(const Case& c, const std::vector<bool>& wants) {
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    Bits at_one;
    for (const int threads : {1, 2}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + ", " + std::to_string(threads) + " threads");
      const kernels::cpu::NumThreadsGuard guard(threads);
      const Bits fused = run_bits(c.fused, c, dtype, wants), unfused = run_bits(c.unfused, c, dtype, wants);
      EXPECT_EQ(fused.y, unfused.y) << "values";
      ASSERT_EQ(fused.grads.size(), unfused.grads.size());
      for (size_t i = 0; i < fused.grads.size(); ++i) EXPECT_EQ(fused.grads[i], unfused.grads[i]) << "input " << i;
      if (threads == 1) at_one = fused;
      else EXPECT_EQ(fused, at_one) << "1 vs 2 threads";
    }
  }
}

std::vector<bool> all(size_t n) { return std::vector<bool>(n, true); }

TEST(GeluAffine, HasTheBitsOfAffineOfGelu) {
  // (8, 64, 128) @ (128, 32): GEMMs and the GELU pass large enough to be
  // split over two threads; (5, 7) @ (7, 3): partial vectors everywhere.
  for (const bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    for (const Case& c : {gelu_case({5, 7}, 3, bias, false), gelu_case({8, 64, 128}, 32, bias, false),
                          gelu_case({9, 6}, 4, bias, true)}) {
      expect_bits_of_the_pair(c, all(c.shapes.size()));
    }
  }
}

TEST(SwigluLinear, HasTheBitsOfLinearOfSwiglu) {
  for (const bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    for (const Case& c : {swiglu_case({5, 7}, 3, bias), swiglu_case({4, 64, 96}, 48, bias)}) {
      expect_bits_of_the_pair(c, all(c.shapes.size()));
    }
  }
}

TEST(ActivationLinear, OnlySomeInputsWantGradients) {
  const Case gelu = gelu_case({6, 10}, 5, true, false);
  for (const std::vector<bool>& wants : std::vector<std::vector<bool>>{
           {true, false, false}, {false, true, false}, {false, false, true}, {false, true, true}, {true, true, false}}) {
    expect_bits_of_the_pair(gelu, wants);
  }
  const Case swiglu = swiglu_case({6, 10}, 5, false);
  for (const std::vector<bool>& wants :
       std::vector<std::vector<bool>>{{true, false, false}, {false, true, false}, {false, false, true},
                                      {true, true, false}, {false, true, true}}) {
    expect_bits_of_the_pair(swiglu, wants);
  }
}

TEST(ActivationLinear, Gradients) {
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return gelu_affine(v[0], v[1], v[2]); },
                         (Tensors{random_leaf({2, 3, 5}, -3, 3, 1), random_leaf({5, 4}, -1, 1, 2),
                                  random_leaf({4}, -1, 1, 3)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return gelu_affine(transpose(v[0], 0, 1), v[1]); },
                         (Tensors{random_leaf({6, 3}, -3, 3, 4), random_leaf({6, 2}, -1, 1, 5)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return swiglu_linear(v[0], v[1], v[2], v[3]); },
                         (Tensors{random_leaf({2, 3, 5}, -5, 5, 6), random_leaf({2, 3, 5}, -2, 2, 7),
                                  random_leaf({4, 5}, -1, 1, 8), random_leaf({4}, -1, 1, 9)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return swiglu_linear(v[0], v[1], v[2]); },
                         (Tensors{random_leaf({1, 1}, -5, 5, 10), random_leaf({1, 1}, -2, 2, 11),
                                  random_leaf({3, 1}, -1, 1, 12)}));
}

// Dropped in forward and replayed for backward: the replay's output is the
// forward's, so the gradients upstream of it (through a second layer that
// reads it) are the kept graph's bit for bit.
TEST(ActivationLinear, ADroppedNodeReplaysTheSameBits) {
  const auto step = [](bool drop) {
    Generator g(3);
    Tensor h = uniform({4, 8, 12}, -3, 3, DType::Float32, g).requires_grad_();
    Tensor w = uniform({12, 6}, -1, 1, DType::Float32, g).requires_grad_();
    Tensor w2 = uniform({6, 6}, -1, 1, DType::Float32, g).requires_grad_();
    Tensor loss;
    {
      RecomputeScope scope([drop](const Node& node) {
        return drop && node.name() == "gelu_affine" ? Tag::Recompute : Tag::Keep;
      });
      loss = sum(mul(affine(gelu_affine(h, w), w2), 0.5));
    }
    loss.backward();
    return std::vector<std::vector<float>>{h.grad().to_vector<float>(), w.grad().to_vector<float>(),
                                           w2.grad().to_vector<float>()};
  };
  EXPECT_EQ(step(true), step(false));
}

TEST(ActivationLinear, SavesTheActivationsInputsAndTheWeightNeverItsOutput) {
  const Tensor h = random_leaf({4, 6}, -1, 1, 1), w = random_leaf({6, 3}, -1, 1, 2), b = random_leaf({3}, -1, 1, 3);
  const Tensor y = gelu_affine(h, w, b);
  const NodeRecord& gelu = y.grad_fn()->record();
  EXPECT_EQ(gelu.op, "gelu_affine");
  EXPECT_EQ(gelu.saved, (std::vector<int>{0, 1}));  // h and W; gelu(h) is made again
  EXPECT_EQ(gelu.side_bytes, 0);
  EXPECT_TRUE(gelu.compute_bound);
  EXPECT_EQ(gelu.flops, 2 * 4 * 3 * 6 + kernels::unary_flops<kernels::Gelu>() * 4 * 6);
  EXPECT_EQ(gelu.replay_flops, gelu.flops);  // a replay is forward again
  EXPECT_EQ(gelu.overwritable_input, -1);
  const Tensor gate = random_leaf({4, 6}, -1, 1, 4), up = random_leaf({4, 6}, -1, 1, 5);
  const Tensor wl = random_leaf({3, 6}, -1, 1, 6);
  const Tensor z = swiglu_linear(gate, up, wl);
  const NodeRecord& swiglu = z.grad_fn()->record();
  EXPECT_EQ(swiglu.op, "swiglu_linear");
  EXPECT_EQ(swiglu.saved, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(swiglu.compute_bound);
  EXPECT_EQ(swiglu.flops, 2 * 4 * 3 * 6 + (kernels::unary_flops<kernels::Silu>() + 1) * 4 * 6);
}

TEST(ActivationLinear, ErrorsNameTheShapesAndDtypes) {
  const std::string fit = testing::error_of([] { gelu_affine(zeros({2, 4}), zeros({5, 3})); });
  EXPECT_TRUE(testing::contains(fit, "gelu_affine")) << fit;
  EXPECT_TRUE(testing::contains(fit, "(2, 4)")) << fit;
  EXPECT_TRUE(testing::contains(fit, "(5, 3)")) << fit;
  const std::string bias = testing::error_of([] { gelu_affine(zeros({2, 4}), zeros({4, 3}), zeros({2})); });
  EXPECT_TRUE(testing::contains(bias, "bias")) << bias;
  const std::string halves = testing::error_of([] { swiglu_linear(zeros({2, 4}), zeros({2, 5}), zeros({3, 4})); });
  EXPECT_TRUE(testing::contains(halves, "swiglu_linear")) << halves;
  EXPECT_TRUE(testing::contains(halves, "(2, 5)")) << halves;
  const std::string dtype =
      testing::error_of([] { swiglu_linear(zeros({2, 4}), zeros({2, 4}), zeros({3, 4}, DType::Float64)); });
  EXPECT_TRUE(testing::contains(dtype, "float64")) << dtype;
}

}  // namespace
}  // namespace remat
