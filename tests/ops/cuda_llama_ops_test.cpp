// rms_norm, rotary and swiglu on the GPU against the same ops on the CPU,
// forward and backward through autograd (label cuda; skipped, with a
// message, where no GPU is present or the build has no CUDA; run on the
// emulated GPU under the sanitizers): warp-per-row and block-per-row
// rms_norm, dweight's column sums in one pass and in chunks, rotary on a
// strided view of a projection, odd sizes; and a replay's bits on the GPU.
//
// Values agree when |gpu - cpu| <= rtol |cpu| + atol: rtol 1e-5 (float32)
// or 1e-12 (float64), atol max(1e-6 or 1e-14, eps * terms), terms being the
// longest sum in an output or gradient (dweight's: the rows; rotary's:
// the position, which multiplies inv_freq's rounding).
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tests/support/gpu.h"

namespace remat {
namespace {

using test::kGpu;

struct LlamaCase {
  std::string name;
  std::vector<Shape> shapes;  // the float inputs, each given a gradient
  std::function<Tensor(const Tensors&)> f;
  int64_t terms = 1;
  double low = -2, high = 2;
};

void expect_gpu_near_cpu(const Tensor& gpu, const Tensor& cpu, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  ASSERT_EQ(gpu.device(), kGpu) << what;
  const std::vector<double> g = gpu.to_vector<double>(), c = cpu.to_vector<double>();
  for (size_t i = 0; i < c.size(); ++i) {
    ASSERT_LE(std::abs(g[i] - c[i]), rtol * std::abs(c[i]) + atol)
        << what << " at " << i << ": got " << g[i] << ", the CPU has " << c[i];
  }
}

void check_llama_op(const LlamaCase& c, DType dtype) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)));
  const bool f32 = dtype == DType::Float32;
  const double eps = f32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
  const double rtol = f32 ? 1e-5 : 1e-12;
  const double atol = std::max(f32 ? 1e-6 : 1e-14, eps * static_cast<double>(c.terms));
  Generator g(23);
  Tensors cpu_in, gpu_in;
  for (const Shape& shape : c.shapes) {
    Tensor x = uniform(shape, c.low, c.high, dtype, g);
    cpu_in.push_back(x.requires_grad_());
    gpu_in.push_back(to(x.detach(), kGpu).requires_grad_());
  }
  const Tensor cpu_out = c.f(cpu_in), gpu_out = c.f(gpu_in);
  expect_gpu_near_cpu(gpu_out, cpu_out, rtol, atol, "forward");
  const Tensor weights = uniform(cpu_out.shape(), -1, 1, dtype, g);
  sum(mul(cpu_out, weights)).backward();
  sum(mul(gpu_out, to(weights, kGpu))).backward();
  for (size_t i = 0; i < cpu_in.size(); ++i) {
    ASSERT_TRUE(gpu_in[i].grad().defined()) << "input " << i;
    expect_gpu_near_cpu(gpu_in[i].grad(), cpu_in[i].grad(), rtol, atol, "gradient of input " + std::to_string(i));
  }
}

std::vector<LlamaCase> cases() {
  // q of a (B, T, 3C) projection as rotary reads it: (B, H, T, D) strided.
  const auto q_of = [](const Tensor& qkv) { return transpose(view(slice(qkv, 2, 0, 4 * 64), {3, 70, 4, 64}), 1, 2); };
  return {
      // A warp a row; dweight sums 300 rows (column_sums in chunks at 130 channels).
      {"rms_norm", {{300, 130}, {130}}, [](const Tensors& x) { return rms_norm(x[0], x[1]); }, 300},
      {"rms_norm without weight", {{300, 130}}, [](const Tensors& x) { return rms_norm(x[0], Tensor()); }, 130},
      // A block a row (1024 channels and more), an odd width.
      {"rms_norm long rows", {{6, 3001}, {3001}}, [](const Tensors& x) { return rms_norm(x[0], x[1], 1e-5); }, 3001},
      {"rms_norm one channel", {{257, 1}, {1}}, [](const Tensors& x) { return rms_norm(x[0], x[1]); }, 257},
      // An angle t * inv_freq carries inv_freq's rounding (a powf that may
      // differ by an ulp between devices) times t: up to 70 eps.
      {"rotary", {{2, 5, 70, 64}}, [](const Tensors& x) { return rotary(x[0]); }, 70},
      {"rotary strided view", {{3, 70, 3 * 4 * 64}}, [q_of](const Tensors& x) { return rotary(q_of(x[0]), 5e5); },
       70},
      {"rotary odd shape, D = 2", {{3, 1, 7, 2}}, [](const Tensors& x) { return rotary(x[0], 100.0); }, 7},
      {"swiglu", {{300, 257}, {300, 257}}, [](const Tensors& x) { return swiglu(x[0], x[1]); }, 1, -6, 6},
      {"swiglu odd size", {{1001}, {1001}}, [](const Tensors& x) { return swiglu(x[0], x[1]); }, 1, -6, 6},
      {"swiglu transposed", {{40, 33}, {33, 40}},
       [](const Tensors& x) { return swiglu(transpose(x[0], 0, 1), x[1]); }, 1, -6, 6},
  };
}

TEST(CudaLlamaOps, MatchTheCpuForwardAndBackward) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  for (const LlamaCase& c : cases()) {
    check_llama_op(c, DType::Float32);
    check_llama_op(c, DType::Float64);
  }
}

// A replay of rms_norm on the GPU scales with its saved rstd: the forward's bits.
TEST(CudaLlamaOps, AnRmsNormReplayGivesTheForwardsBits) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  const TagPolicy recompute_all = [](const Node&) { return Tag::Recompute; };
  const Tensor x = to(uniform({300, 130}, -3, 3), kGpu).requires_grad_();
  const Tensor w = to(uniform({130}, 0.5, 1.5), kGpu);
  Tensor y;
  {
    RecomputeScope scope(recompute_all);
    y = rms_norm(x, w);
  }
  const Tensor replayed = y.grad_fn()->rebuild();
  EXPECT_EQ(replayed.to_vector<float>(), y.to_vector<float>());
}

}  // namespace
}  // namespace remat

#else

TEST(CudaLlamaOps, NeedACudaBuild) {
  GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): rms_norm, rotary and swiglu on the GPU not built";
}

#endif
