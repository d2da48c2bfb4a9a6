// Every op on the GPU against the same op on the CPU, forward and backward
// through autograd (label cuda; skipped, with a message, where no GPU is
// present or the build has no CUDA): float32 within 1e-5 relative, float64
// within 1e-12, on shapes with broadcasting, strided views and odd sizes.
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tests/support/gpu.h"

namespace remat {
namespace {

const Device kGpu = Device::cuda(0);

// An op case: float inputs (gradients checked for each), int64 inputs
// (ids, targets, masks) and the function of both.
struct Case {
  std::string name;
  std::vector<Shape> shapes;
  std::function<Tensor(const Tensors& floats, const Tensors& ints)> f;
  std::vector<Tensor> ints = {};
  double low = -2, high = 2;
};

void expect_close(const Tensor& gpu, const Tensor& cpu, const std::string& what) {
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  const std::vector<double> g = gpu.to_vector<double>(), c = cpu.to_vector<double>();
  const double tolerance = cpu.dtype() == DType::Float32 ? 1e-5 : 1e-12;
  for (size_t i = 0; i < c.size(); ++i) {
    if (std::isnan(c[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " at " << i;
      continue;
    }
    ASSERT_NEAR(g[i], c[i], tolerance * std::max(1.0, std::abs(c[i]))) << what << " at " << i;
  }
}

void check(const Case& c, DType dtype) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)));
  Generator g(17);
  Tensors cpu_in, gpu_in, cpu_ints, gpu_ints;
  for (const Shape& shape : c.shapes) {
    Tensor x = uniform(shape, c.low, c.high, dtype, g);
    cpu_in.push_back(x.requires_grad_());
    gpu_in.push_back(to(x.detach(), kGpu).requires_grad_());
  }
  for (const Tensor& i : c.ints) {
    cpu_ints.push_back(i);
    gpu_ints.push_back(to(i, kGpu));
  }
  const Tensor cpu_out = c.f(cpu_in, cpu_ints), gpu_out = c.f(gpu_in, gpu_ints);
  EXPECT_EQ(gpu_out.device(), kGpu);
  expect_close(gpu_out, cpu_out, "forward");
  const Tensor weights = uniform(cpu_out.shape(), -1, 1, dtype, g);  // a loss that weighs every output
  sum(mul(cpu_out, weights)).backward();
  sum(mul(gpu_out, to(weights, kGpu))).backward();
  for (size_t i = 0; i < cpu_in.size(); ++i) {
    ASSERT_TRUE(gpu_in[i].grad().defined()) << "input " << i;
    expect_close(gpu_in[i].grad(), cpu_in[i].grad(), "gradient of input " + std::to_string(i));
  }
}

std::vector<Case> cases() {
  const Tensor ids = from_vector(std::vector<int64_t>{3, 0, 7, 3, 3, 9, 1, 0}, {2, 4});
  const Tensor targets = from_vector(std::vector<int64_t>{1, -100, 4, 0, 2, 4}, {6});
  const auto one = [](Tensor (*op)(const Tensor&)) {
    return [op](const Tensors& x, const Tensors&) { return op(x[0]); };
  };
  return {
      {"neg", {{37, 5}}, one(&neg)},
      {"relu", {{37, 5}}, one(&relu)},
      {"tanh", {{37, 5}}, one(&tanh)},
      {"sigmoid", {{37, 5}}, one(&sigmoid)},
      {"exp", {{37, 5}}, one(&exp)},
      {"log", {{37, 5}}, one(&log), {}, 0.1, 3},
      {"gelu", {{37, 5}}, one(&gelu)},
      {"add broadcast", {{4, 1, 6}, {3, 1}}, [](const Tensors& x, const Tensors&) { return add(x[0], x[1]); }},
      {"sub", {{5, 6}, {5, 6}}, [](const Tensors& x, const Tensors&) { return sub(x[0], x[1]); }},
      {"mul transposed", {{6, 5}, {5, 6}},
       [](const Tensors& x, const Tensors&) { return mul(transpose(x[0], 0, 1), x[1]); }},
      {"div", {{5, 6}, {6}}, [](const Tensors& x, const Tensors&) { return div(x[0], add(x[1], 3.0)); }, {}, 0.5, 2},
      {"sum over axes", {{3, 4, 5}}, [](const Tensors& x, const Tensors&) { return sum(x[0], {0, 2}); }},
      {"mean", {{3, 4, 5}}, [](const Tensors& x, const Tensors&) { return mean(x[0], {1}); }},
      {"max", {{3, 7, 2}}, [](const Tensors& x, const Tensors&) { return max(x[0], 1); }},
      {"softmax", {{6, 9}}, [](const Tensors& x, const Tensors&) { return softmax(x[0], -1); }},
      {"softmax middle axis", {{3, 9, 4}}, [](const Tensors& x, const Tensors&) { return softmax(x[0], 1); }},
      {"log_softmax", {{6, 9}}, [](const Tensors& x, const Tensors&) { return log_softmax(x[0], -1); }},
      {"cross_entropy", {{6, 5}}, [](const Tensors& x, const Tensors& i) { return cross_entropy(x[0], i[0]); },
       {targets}},
      {"layer_norm", {{7, 12}, {12}, {12}},
       [](const Tensors& x, const Tensors&) { return layer_norm(x[0], x[1], x[2]); }},
      {"embedding", {{10, 6}}, [](const Tensors& x, const Tensors& i) { return embedding(x[0], i[0]); }, {ids}},
      {"masked_fill causal", {{2, 5, 5}},
       [](const Tensors& x, const Tensors&) { return masked_fill(x[0], causal_mask(5, x[0].device()), -1e4); }},
      {"matmul", {{7, 5}, {5, 3}}, [](const Tensors& x, const Tensors&) { return matmul(x[0], x[1], 0.5); }},
      {"matmul batched broadcast", {{2, 3, 4, 5}, {3, 5, 6}},
       [](const Tensors& x, const Tensors&) { return matmul(x[0], x[1]); }},
      {"matmul transposed", {{5, 7}, {3, 5}},
       [](const Tensors& x, const Tensors&) { return matmul(transpose(x[0], 0, 1), transpose(x[1], 0, 1)); }},
      {"linear", {{2, 3, 5}, {4, 5}, {4}}, [](const Tensors& x, const Tensors&) { return linear(x[0], x[1], x[2]); }},
      {"affine", {{6, 5}, {5, 4}, {4}}, [](const Tensors& x, const Tensors&) { return affine(x[0], x[1], x[2]); }},
      {"concat slice", {{3, 4}, {3, 2}},
       [](const Tensors& x, const Tensors&) { return slice(concat({x[0], x[1]}, 1), 1, 1, 6, 2); }},
      {"contiguous permute", {{2, 3, 4}},
       [](const Tensors& x, const Tensors&) { return contiguous(permute(x[0], {2, 0, 1})); }},
  };
}

TEST(CudaOps, EveryOpMatchesTheCpuForwardAndBackward) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  for (const Case& c : cases()) {
    check(c, DType::Float32);
    check(c, DType::Float64);
  }
}

TEST(CudaOps, DropoutDrawsTheCpusMask) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  const Tensor x = ones({1000, 7});
  Generator cpu_generator(5), gpu_generator(5);
  const Tensor cpu = dropout(x, 0.3, true, cpu_generator);
  const Tensor gpu = dropout(to(x, kGpu), 0.3, true, gpu_generator);
  EXPECT_EQ(gpu.to_vector<float>(), cpu.to_vector<float>());
}

TEST(CudaOps, AnOpGivenTensorsOnTwoDevicesNamesBoth) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  try {
    (void)add(ones({2}), to(ones({2}), kGpu));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace remat

#else

TEST(CudaOps, NeedACudaBuild) { GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): ops on the GPU not built"; }

#endif
