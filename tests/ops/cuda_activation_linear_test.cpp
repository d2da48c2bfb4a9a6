// gelu_affine and swiglu_linear on the GPU (label cuda; skipped, with a
// message, where no GPU is present or the build has no CUDA; run on the
// emulated GPU under the sanitizers): the bits of the unfused pair on the
// same device, values and every gradient, with fused epilogues off and on
// (the bias and its gradient in the GEMMs' epilogues, as linear's); and the
// CPU's values within float rounding.
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/gemm.h"
#include "ops/ops.h"
#include "tests/support/gpu.h"

namespace remat {
namespace {

using test::FusedEpilogues;
using test::kGpu;

using Fn = std::function<Tensor(const Tensors&)>;

struct ActivationResult {
  std::vector<double> y;
  std::vector<std::vector<double>> grads;
};

// f on leaves drawn alike every time (ranges[i] their spread), on `device`;
// the gradients of sum(f * w) for a fixed random w.
ActivationResult run_on(const Fn& f, const std::vector<Shape>& shapes, const std::vector<double>& ranges, Device device) {
  Generator g(17);
  Tensors leaves;
  for (size_t i = 0; i < shapes.size(); ++i) {
    leaves.push_back(to(uniform(shapes[i], -ranges[i], ranges[i], DType::Float32, g), device).requires_grad_());
  }
  const Tensor y = f(leaves);
  const Tensor w = to(uniform(y.shape(), -1, 1, DType::Float32, g), device);
  sum(mul(y, w)).backward();
  ActivationResult r{y.to_vector<double>(), {}};
  for (const Tensor& leaf : leaves) r.grads.push_back(leaf.grad().to_vector<double>());
  return r;
}

void expect_pair_bits_and_cpu_values(const Fn& fused, const Fn& unfused, const std::vector<Shape>& shapes,
                                     const std::vector<double>& ranges, int64_t terms) {
  const ActivationResult cpu = run_on(fused, shapes, ranges, Device::cpu());
  for (const bool epilogues : {false, true}) {
    SCOPED_TRACE(epilogues ? "fused epilogues" : "plain GEMMs");
    const FusedEpilogues flag(epilogues);
    const ActivationResult gpu = run_on(fused, shapes, ranges, kGpu), pair = run_on(unfused, shapes, ranges, kGpu);
    EXPECT_EQ(gpu.y, pair.y);
    EXPECT_EQ(gpu.grads, pair.grads);
    const double atol = 1e-6 * static_cast<double>(terms);
    for (size_t i = 0; i < cpu.y.size(); ++i) {
      ASSERT_LE(std::abs(gpu.y[i] - cpu.y[i]), 1e-5 * std::abs(cpu.y[i]) + atol) << "forward at " << i;
    }
    for (size_t k = 0; k < cpu.grads.size(); ++k) {
      for (size_t i = 0; i < cpu.grads[k].size(); ++i) {
        ASSERT_LE(std::abs(gpu.grads[k][i] - cpu.grads[k][i]), 1e-5 * std::abs(cpu.grads[k][i]) + atol)
            << "gradient of input " << k << " at " << i;
      }
    }
  }
}

TEST(CudaActivationLinear, GeluAffineHasThePairsBitsAndTheCpusValues) {
  REMAT_SKIP_WITHOUT_GPU("gelu_affine");
  // (3, 40, 128) @ (128, 24): 120 rows summed in dW and db.
  expect_pair_bits_and_cpu_values([](const Tensors& x) { return gelu_affine(x[0], x[1], x[2]); },
                                  [](const Tensors& x) { return affine(gelu(x[0]), x[1], x[2]); },
                                  {{3, 40, 128}, {128, 24}, {24}}, {3, 0.5, 1}, 128);
}

TEST(CudaActivationLinear, SwigluLinearHasThePairsBitsAndTheCpusValues) {
  REMAT_SKIP_WITHOUT_GPU("swiglu_linear");
  expect_pair_bits_and_cpu_values([](const Tensors& x) { return swiglu_linear(x[0], x[1], x[2]); },
                                  [](const Tensors& x) { return linear(swiglu(x[0], x[1]), x[2]); },
                                  {{2, 33, 96}, {2, 33, 96}, {40, 96}}, {4, 2, 0.5}, 96);
}

}  // namespace
}  // namespace remat

#else

TEST(CudaActivationLinear, NeedACudaBuild) {
  GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): gelu_affine and swiglu_linear on the GPU not built";
}

#endif
