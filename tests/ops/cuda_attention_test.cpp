// causal_softmax on the GPU (kernels/cuda/attention.cu) against the CPU,
// forward and backward through autograd (label cuda; skipped, with a
// message, where no GPU is present or the build has no CUDA), on shapes
// across the kernel's split: a warp per row (T < 1024; rows that do not
// fill the last block; more rows than the grid has warps) and a block per
// row (T >= 1024). Values agree when |gpu - cpu| <= rtol |cpu| + atol
// (float32 1e-5 and 1e-6, float64 1e-12 and 1e-14). On the GPU itself it is
// masked_fill + softmax bit for bit, and a second run (on the emulated GPU
// with its threads in a shuffled order) gives the same bits.
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tests/support/gpu.h"
#include "tests/support/gradcheck.h"

#if REMAT_CUDA_EMULATION
#include "kernels/cuda/emulation/control.h"
#endif

namespace remat {
namespace {

using test::kGpu;
using testing::kInf;

// The output and x's gradient under the loss sum(y * weights).
struct AttentionResult {
  Tensor y, dx;
};

AttentionResult run_attention(const Tensor& x0, const Tensor& weights, bool fused) {
  const Tensor x = x0.detach().requires_grad_();
  const Tensor y = fused ? causal_softmax(x)
                         : softmax(masked_fill(x, causal_mask(x0.shape().back(), x0.device()), -kInf), -1);
  sum(mul(y, weights)).backward();
  return {y.detach(), x.grad()};
}

void expect_close(const Tensor& gpu, const Tensor& cpu, const std::string& what) {
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  ASSERT_EQ(gpu.device(), kGpu) << what;
  const bool f32 = cpu.dtype() == DType::Float32;
  const double rtol = f32 ? 1e-5 : 1e-12, atol = f32 ? 1e-6 : 1e-14;
  const std::vector<double> g = gpu.to_vector<double>(), c = cpu.to_vector<double>();
  for (size_t i = 0; i < c.size(); ++i) {
    ASSERT_LE(std::abs(g[i] - c[i]), rtol * std::abs(c[i]) + atol)
        << what << " at " << i << ": got " << g[i] << ", the CPU has " << c[i];
  }
}

std::vector<unsigned char> tensor_bytes(const Tensor& t) {
  const Tensor host = to(t, Device::cpu());
  std::vector<unsigned char> out(static_cast<size_t>(host.numel()) * (host.dtype() == DType::Float32 ? 4 : 8));
  if (!out.empty()) std::memcpy(out.data(), host.raw_data(), out.size());
  return out;
}

void check_attention(const Shape& shape, DType dtype) {
  SCOPED_TRACE(str(shape) + " " + std::string(dtype_name(dtype)));
  Generator g(17);
  const Tensor x = normal(shape, 0.0, 3.0, dtype, g), weights = uniform(shape, -1, 1, dtype, g);
  const Tensor gx = to(x, kGpu), gweights = to(weights, kGpu);
  const AttentionResult cpu = run_attention(x, weights, true), gpu = run_attention(gx, gweights, true);
  expect_close(gpu.y, cpu.y, "forward");
  expect_close(gpu.dx, cpu.dx, "gradient");
  // The GPU's masked_fill + softmax, bit for bit (attention.cu's first comment).
  const AttentionResult masked = run_attention(gx, gweights, false);
  EXPECT_TRUE(tensor_bytes(gpu.y) == tensor_bytes(masked.y)) << "forward differs from the GPU's masked_fill + softmax";
  EXPECT_TRUE(tensor_bytes(gpu.dx) == tensor_bytes(masked.dx)) << "gradient differs from the GPU's masked_fill + softmax";
  // Again: on the emulated GPU with its threads in a shuffled order (the
  // order before it back after).
  const AttentionResult again = [&] {
#if REMAT_CUDA_EMULATION
    const test::ShuffledThreads order(0x5eed);
#endif
    return run_attention(gx, gweights, true);
  }();
  EXPECT_TRUE(tensor_bytes(again.y) == tensor_bytes(gpu.y) && tensor_bytes(again.dx) == tensor_bytes(gpu.dx))
      << "a second run gave other bits";
}

TEST(CudaAttention, CausalSoftmaxByWarpsMatchesTheCpu) {
  REMAT_SKIP_WITHOUT_GPU("causal_softmax on cuda:0");
  // 1200 rows of 100 (150 blocks of 8 warps, rows longer than a warp and
  // not a multiple of 32), 21 rows of 7, one row of 1.
  for (const Shape& shape : std::vector<Shape>{{3, 4, 100, 100}, {3, 7, 7}, {1, 1}}) {
    check_attention(shape, DType::Float32);
    check_attention(shape, DType::Float64);
  }
}

TEST(CudaAttention, CausalSoftmaxByBlocksMatchesTheCpu) {
  REMAT_SKIP_WITHOUT_GPU("causal_softmax on cuda:0");
  check_attention({1, 1030, 1030}, DType::Float32);  // 1030 rows of 1030: a block per row
  check_attention({1, 1024, 1024}, DType::Float64);  // the first T that takes a block
}

TEST(CudaAttention, CausalSoftmaxCoversMoreRowsThanTheGridHasWarps) {
  REMAT_SKIP_WITHOUT_GPU("causal_softmax on cuda:0");
  check_attention({2100, 16, 16}, DType::Float32);  // 33,600 rows: more than 4096 blocks x 8 warps
}

}  // namespace
}  // namespace remat

#else

TEST(CudaAttention, NeedACudaBuild) {
  GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): causal_softmax on the GPU not built";
}

#endif
