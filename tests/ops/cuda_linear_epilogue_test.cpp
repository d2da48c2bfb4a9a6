// linear and affine with cuBLASLt's epilogues on (Note [Fused epilogues],
// kernels/cuda/gemm.h), label cuda: on the GPU, outputs and gradients with
// the flag on equal those with it off and those of the unfused ops
// (matmul + add, sums) within float rounding, relative to the largest
// value, with and without bias, on odd and multi-block shapes; affine_gelu
// against affine then gelu; on the CPU the flag changes no bit; and, on the
// emulated GPU, the flag off launches the same grids as before (repeat_rows,
// sum_rows) and the flag on none.
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/gemm.h"
#include "ops/ops.h"
#include "tests/support/gpu.h"
#if REMAT_CUDA_EMULATION
#include "kernels/cuda/emulation/control.h"
#endif

namespace remat {
namespace {

using test::FusedEpilogues;
using test::kGpu;

// max |x - y| over max |y|, on the host.
double relative_gap(const Tensor& x, const Tensor& y) {
  EXPECT_EQ(x.shape(), y.shape());
  return test::relative_gap(x.to_vector<double>(), y.to_vector<double>());
}

bool same_bits(const Tensor& x, const Tensor& y) { return x.to_vector<double>() == y.to_vector<double>(); }

// One layer's output and its inputs' gradients, under a loss that weighs
// every output.
struct EpilogueResult {
  Tensor out;
  Tensors grads;
};

enum class Layer { Linear, Affine, Unfused };

struct EpilogueCase {
  Shape x;
  int64_t out_features;
  bool bias;
};
// Odd sizes; rows x features past one block of 256 threads; a 3-D input.
const EpilogueCase kCases[] = {{{1, 1}, 1, true}, {{7, 13}, 5, true}, {{37, 29}, 53, false}, {{2, 150, 70}, 90, true},
                       {{301, 33}, 67, true}, {{301, 33}, 67, false}};

EpilogueResult run_layer(const EpilogueCase& c, Layer layer, Device device, DType dtype) {
  Generator g(5);
  const int64_t in = c.x.back();
  const bool out_in = layer != Layer::Affine;  // the unfused reference uses linear's (out, in)
  Tensor x = to(uniform(c.x, -2, 2, dtype, g), device).requires_grad_();
  Tensor w = to(uniform(out_in ? Shape{c.out_features, in} : Shape{in, c.out_features}, -1, 1, dtype, g), device)
                 .requires_grad_();
  Tensor b = c.bias ? to(uniform({c.out_features}, -1, 1, dtype, g), device).requires_grad_() : Tensor();
  Tensor out;
  if (layer == Layer::Linear) out = linear(x, w, b);
  if (layer == Layer::Affine) out = affine(x, w, b);
  if (layer == Layer::Unfused) {
    out = matmul(x, transpose(w, 0, 1));
    if (c.bias) out = add(out, b);
  }
  Shape weights_shape = c.x;
  weights_shape.back() = c.out_features;
  sum(mul(out, to(uniform(weights_shape, -1, 1, dtype, g), device))).backward();
  EpilogueResult r{out.detach(), {x.grad(), w.grad()}};
  if (c.bias) r.grads.push_back(b.grad());
  return r;
}

void expect_results_near(const EpilogueResult& got, const EpilogueResult& want, double tolerance, const std::string& what) {
  EXPECT_LT(relative_gap(got.out, want.out), tolerance) << what << ": output";
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < want.grads.size(); ++i) {
    EXPECT_LT(relative_gap(got.grads[i], want.grads[i]), tolerance) << what << ": gradient " << i;
  }
}

TEST(CudaFusedEpilogues, LinearAndAffineMatchTheUnfusedPathWithinFloatRounding) {
  REMAT_SKIP_WITHOUT_GPU("fused epilogues");
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    const double tolerance = dtype == DType::Float32 ? 1e-5 : 1e-12;
    for (const EpilogueCase& c : kCases) {
      for (const Layer layer : {Layer::Linear, Layer::Affine}) {
        const std::string what = str(c.x) + (layer == Layer::Linear ? " linear" : " affine") +
                                 (c.bias ? " with bias " : " ") + std::string(dtype_name(dtype));
        const EpilogueResult off = run_layer(c, layer, kGpu, dtype);
        EpilogueResult on;
        {
          FusedEpilogues fused(true);
          on = run_layer(c, layer, kGpu, dtype);
        }
        expect_results_near(on, off, tolerance, what);
        expect_results_near(on, run_layer(c, layer, Device::cpu(), dtype), tolerance, what + " (against the CPU)");
      }
    }
  }
}

// The fused op's gradients against separate ops (matmul, add; the sums of
// add's backward), the flag on for both.
TEST(CudaFusedEpilogues, TheFusedLinearsGradientsMatchSeparateOps) {
  REMAT_SKIP_WITHOUT_GPU("fused epilogues");
  FusedEpilogues fused(true);
  for (const EpilogueCase& c : kCases) {
    expect_results_near(run_layer(c, Layer::Linear, kGpu, DType::Float32), run_layer(c, Layer::Unfused, kGpu, DType::Float32), 1e-5,
                str(c.x));
  }
}

// affine_gelu: one node on the GPU with the flag on, its output and
// gradients those of gelu(affine(...)) with the flag off within float
// rounding; out_features 64 takes the fused GELU_AUX_BIAS path, 53 (not a
// multiple of 8, cuBLASLt's aux ld rule) its fallback.
TEST(CudaFusedEpilogues, AffineGeluMatchesAffineThenGelu) {
  REMAT_SKIP_WITHOUT_GPU("fused epilogues");
  for (const Shape& x_shape : {Shape{2, 150, 40}, Shape{37, 29}}) {
    for (const int64_t out_features : {int64_t{64}, int64_t{53}}) {
      Generator g(3);
      const int64_t in = x_shape.back();
      const Tensor x0 = uniform(x_shape, -2, 2, DType::Float32, g), w0 = uniform({in, out_features}, -1, 1, DType::Float32, g);
      const Tensor b0 = uniform({out_features}, -1, 1, DType::Float32, g);
      Shape out_shape = x_shape;
      out_shape.back() = out_features;
      const Tensor weights = to(uniform(out_shape, -1, 1, DType::Float32, g), kGpu);
      const auto run_once = [&](bool on) {
        FusedEpilogues fused(on);
        Tensor x = to(x0, kGpu).requires_grad_(), w = to(w0, kGpu).requires_grad_(), b = to(b0, kGpu).requires_grad_();
        const Tensor y = affine_gelu(x, w, b);
        EXPECT_EQ(y.grad_fn()->name(), on ? "affine_gelu" : "gelu");
        sum(mul(y, weights)).backward();
        return EpilogueResult{y.detach(), {x.grad(), w.grad(), b.grad()}};
      };
      expect_results_near(run_once(true), run_once(false), 1e-5, str(x_shape) + " -> " + std::to_string(out_features));
    }
  }
}

TEST(CudaFusedEpilogues, TheFlagChangesNoBitOnTheCpu) {
  for (const EpilogueCase& c : kCases) {
    for (const Layer layer : {Layer::Linear, Layer::Affine}) {
      const EpilogueResult off = run_layer(c, layer, Device::cpu(), DType::Float32);
      FusedEpilogues fused(true);
      const EpilogueResult on = run_layer(c, layer, Device::cpu(), DType::Float32);
      EXPECT_TRUE(same_bits(on.out, off.out)) << str(c.x);
      for (size_t i = 0; i < off.grads.size(); ++i) EXPECT_TRUE(same_bits(on.grads[i], off.grads[i])) << str(c.x);
    }
  }
}

#if REMAT_CUDA_EMULATION
// Grids the emulated GPU ran while `fn` ran (GEMMs, through cuBLAS or
// cuBLASLt, run none).
template <class Fn>
uint64_t grids_during(Fn&& fn) {
  kernels::cuda::synchronize(kernels::cuda::compute_stream(0));
  const uint64_t before = remat_emulation::counters().grids;
  fn();
  kernels::cuda::synchronize(kernels::cuda::compute_stream(0));
  return remat_emulation::counters().grids - before;
}

TEST(CudaFusedEpilogues, OffTheLaunchesAreTodaysAndOnTheBiasKernelsGo) {
  Generator g(9);
  const Tensor dout = to(uniform({301, 67}, -1, 1, DType::Float32, g), kGpu);
  for (const bool on : {false, true}) {
    FusedEpilogues fused(on);
    // Fresh leaves: no gradient to accumulate into.
    const Tensor x = to(uniform({301, 33}, -1, 1, DType::Float32, g), kGpu).requires_grad_();
    const Tensor w = to(uniform({67, 33}, -1, 1, DType::Float32, g), kGpu).requires_grad_();
    const Tensor b = to(uniform({67}, -1, 1, DType::Float32, g), kGpu).requires_grad_();
    Tensor y;
    EXPECT_EQ(grids_during([&] { y = linear(x, w, b); }), on ? 0u : 1u) << "forward: repeat_rows, off";
    EXPECT_EQ(grids_during([&] { y.backward(dout); }), on ? 0u : 1u) << "backward: sum_rows, off";
  }
  // Without a bias nothing changes: no grid either way.
  const Tensor x = to(uniform({301, 33}, -1, 1, DType::Float32, g), kGpu);
  const Tensor w = to(uniform({67, 33}, -1, 1, DType::Float32, g), kGpu);
  for (const bool on : {false, true}) {
    FusedEpilogues fused(on);
    Tensor y;
    EXPECT_EQ(grids_during([&] { y = linear(x, w); }), 0u);
  }
  // affine_gelu: no grid where the GELU rides in the epilogue (out_features
  // 64); where cuBLASLt's aux ld rule rules it out (53, not a multiple of
  // 8), the bias still does, and GELU is one grid of its own.
  FusedEpilogues fused(true);
  for (const int64_t out_features : {int64_t{64}, int64_t{53}}) {
    const Tensor wt = to(uniform({33, out_features}, -1, 1, DType::Float32, g), kGpu);
    const Tensor bt = to(uniform({out_features}, -1, 1, DType::Float32, g), kGpu);
    Tensor y;
    EXPECT_EQ(grids_during([&] { y = affine_gelu(x, wt, bt); }), out_features == 64 ? 0u : 1u) << out_features;
  }
}
#endif

}  // namespace
}  // namespace remat

#else

TEST(CudaFusedEpilogues, NeedACudaBuild) {
  GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): fused epilogues not built";
}

#endif
