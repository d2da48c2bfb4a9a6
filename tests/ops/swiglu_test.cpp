// swiglu: a hand case; on the CPU the bits of mul(silu(gate), up), values
// and both gradients, float32 and float64, odd sizes and strided inputs, at
// one and two threads; float64 gradient checks; what the node saves; errors.
#include "ops/swiglu.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/gradcheck.h"

namespace remat {
namespace {

using testing::random_leaf;

TEST(Swiglu, HandComputed) {
  // silu(0) = 0, silu(1) = 1 / (1 + e^-1), silu(-2) = -2 / (1 + e^2); times up = (2, 3, 4).
  Tensor gate = from_vector(std::vector<double>{0, 1, -2}, {3}).requires_grad_();
  Tensor up = from_vector(std::vector<double>{2, 3, 4}, {3}).requires_grad_();
  const Tensor y = swiglu(gate, up);
  const double s1 = 1 / (1 + std::exp(-1.0)), sm2 = 1 / (1 + std::exp(2.0));
  const std::vector<double> expected{0, 3 * s1, 4 * -2 * sm2};
  const std::vector<double> values = y.to_vector<double>();
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(values[i], expected[i], 1e-15) << i;
  // d sum(y)/dgate = up s (1 + g (1 - s)): 2 * 0.5 at 0; d/dup = silu(gate).
  sum(y).backward();
  const std::vector<double> dgate = gate.grad().to_vector<double>(), dup = up.grad().to_vector<double>();
  EXPECT_NEAR(dgate[0], 1.0, 1e-15);
  EXPECT_NEAR(dgate[1], 3 * s1 * (1 + (1 - s1)), 1e-15);
  EXPECT_NEAR(dgate[2], 4 * sm2 * (1 - 2 * (1 - sm2)), 1e-15);
  EXPECT_NEAR(dup[1], s1, 1e-15);
  EXPECT_NEAR(dup[2], -2 * sm2, 1e-15);
}

// swiglu and mul(silu(gate), up) from the same leaves, bit for bit: values,
// dgate and dup, gate and up read through `view`.
template <class T>
void expect_bits_of_the_composition(const Shape& shape, DType dtype, const std::function<Tensor(const Tensor&)>& view) {
  Generator g(7);
  Tensor gate = uniform(shape, -6, 6, dtype, g).requires_grad_(), up = uniform(shape, -2, 2, dtype, g).requires_grad_();
  const Tensor y = swiglu(view(gate), view(up));
  const Tensor y_ref = mul(silu(view(gate)), view(up));
  EXPECT_EQ(y.to_vector<T>(), y_ref.to_vector<T>()) << "values";
  const Tensor dy = uniform(y.shape(), -1, 1, dtype, g);
  sum(y * dy).backward();
  const std::vector<T> dgate = gate.grad().to_vector<T>(), dup = up.grad().to_vector<T>();
  gate.set_grad(Tensor());
  up.set_grad(Tensor());
  sum(y_ref * dy).backward();
  EXPECT_EQ(dgate, gate.grad().to_vector<T>()) << "dgate";
  EXPECT_EQ(dup, up.grad().to_vector<T>()) << "dup";
}

using testing::kAsIs;

TEST(Swiglu, HasTheBitsOfSiluTimesUp) {
  // 1001 and 37: the last vector is a partial one; (8, 256, 96) above
  // 2 * kParallelGrain, split over threads.
  for (const int threads : {1, 2}) {
    const kernels::cpu::NumThreadsGuard guard(threads);
    for (const Shape& shape : {Shape{1}, Shape{37}, Shape{7, 143}, Shape{8, 256, 96}}) {
      SCOPED_TRACE(str(shape) + ", " + std::to_string(threads) + " threads");
      expect_bits_of_the_composition<float>(shape, DType::Float32, kAsIs);
      expect_bits_of_the_composition<double>(shape, DType::Float64, kAsIs);
    }
  }
}

TEST(Swiglu, HasTheBitsOfSiluTimesUpOnStridedInputs) {
  const auto transposed = [](const Tensor& t) { return transpose(t, 0, 1); };
  expect_bits_of_the_composition<float>({33, 17}, DType::Float32, transposed);
  expect_bits_of_the_composition<double>({33, 17}, DType::Float64, transposed);
  // gate and up as the two halves of one (rows, 2 F) projection.
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    Generator g(9);
    Tensor h = uniform({6, 2 * 21}, -4, 4, dtype, g).requires_grad_();
    const Tensor y = swiglu(slice(h, 1, 0, 21), slice(h, 1, 21, 42));
    const Tensor y_ref = mul(silu(slice(h, 1, 0, 21)), slice(h, 1, 21, 42));
    EXPECT_EQ(y.to_vector<double>(), y_ref.to_vector<double>());
    sum(y * y).backward();
    const std::vector<double> dh = h.grad().to_vector<double>();
    h.set_grad(Tensor());
    sum(y_ref * y_ref).backward();
    EXPECT_EQ(dh, h.grad().to_vector<double>());
  }
}

TEST(Swiglu, Gradients) {
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return swiglu(v[0], v[1]); },
                         (Tensors{random_leaf({3, 7}, -5, 5, 1), random_leaf({3, 7}, -2, 2, 2)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return swiglu(transpose(v[0], 0, 1), v[1]); },
                         (Tensors{random_leaf({5, 3}, -5, 5, 3), random_leaf({3, 5}, -2, 2, 4)}));
  EXPECT_GRADIENTS_MATCH([](const Tensors& v) { return swiglu(v[0], v[1]); },
                         (Tensors{random_leaf({1}, -5, 5, 5), random_leaf({1}, -2, 2, 6)}));
}

TEST(Swiglu, GradientOfOneInputOnly) {
  Tensor gate = random_leaf({4, 9}, -3, 3, 7);
  const Tensor up = random_leaf({4, 9}, -2, 2, 8).detach();
  sum(swiglu(gate, up)).backward();
  const std::vector<double> dgate = gate.grad().to_vector<double>();
  gate.set_grad(Tensor());
  sum(mul(silu(gate), up)).backward();
  EXPECT_EQ(dgate, gate.grad().to_vector<double>());
  const Tensor gate_only = gate.detach();
  Tensor up_leaf = up.detach().requires_grad_();
  sum(swiglu(gate_only, up_leaf)).backward();
  EXPECT_EQ(up_leaf.grad().to_vector<double>(), silu(gate_only).to_vector<double>());
}

TEST(Swiglu, SavesGateAndUpOnly) {
  const Tensor gate = random_leaf({4, 6}, -1, 1, 9), up = random_leaf({4, 6}, -1, 1, 10);
  const Tensor y = swiglu(gate, up);
  const NodeRecord& record = y.grad_fn()->record();
  EXPECT_EQ(record.op, "swiglu");
  EXPECT_EQ(record.saved, (std::vector<int>{0, 1}));
  EXPECT_EQ(record.side_bytes, 0);
  EXPECT_EQ(record.flops, 5 * 24);
  EXPECT_FALSE(record.compute_bound);
}

TEST(Swiglu, ErrorsNameTheShapesAndDtypes) {
  const std::string shape = testing::error_of([] { swiglu(zeros({2, 4}), zeros({2, 5})); });
  EXPECT_TRUE(testing::contains(shape, "swiglu")) << shape;
  EXPECT_TRUE(testing::contains(shape, "(2, 4)")) << shape;
  EXPECT_TRUE(testing::contains(shape, "(2, 5)")) << shape;
  const std::string dtype = testing::error_of([] { swiglu(zeros({3}), zeros({3}, DType::Float64)); });
  EXPECT_TRUE(testing::contains(dtype, "float32")) << dtype;
  EXPECT_TRUE(testing::contains(dtype, "float64")) << dtype;
}

}  // namespace
}  // namespace remat
