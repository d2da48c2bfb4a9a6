// The optimizers' GPU paths (label cuda): AdamW's multi-tensor step, one
// launch for every parameter of a device and dtype, against one adamw_step
// launch a parameter (the same bits) and against the CPU (the same bits on
// the emulated GPU, whose device math is the host's; within rounding on a
// GPU, where nvcc may fuse a multiply-add), over parameters of odd sizes and
// several steps, one parameter skipping a step; clip_grad_norm with its norm
// on the GPU against the old per-gradient sums (the same bits) and the CPU
// (the same bits where every sum is exact), a NaN norm, no clip when the
// norm is small, mixed dtypes, and the number of launches.
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/factory.h"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/reduce.h"
#include "kernels/math.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "tests/support/gpu.h"

#if REMAT_CUDA_EMULATION
#include "kernels/cuda/emulation/control.h"
#endif

namespace remat::optim {
namespace {

const std::vector<int64_t> kSizes = {1, 31, 1000, 70000, 16384, 16385, 5, 257};

template <class T>
DType dtype_of() {
  return sizeof(T) == 4 ? DType::Float32 : DType::Float64;
}

Tensor leaf_on(const Tensor& host, Device device) {
  Tensor t = to(host, device);
  t.requires_grad_();
  return t;
}

template <class T>
std::vector<T> host_values(const Tensor& t) {
  return to(t, Device::cpu()).to_vector<T>();
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// a == b bit for bit on the emulated GPU; within rounding on a GPU.
template <class T>
void expect_as_cpu(const std::vector<T>& cuda, const std::vector<T>& cpu, const std::string& what) {
#if REMAT_CUDA_EMULATION
  EXPECT_TRUE(same_bits(cuda, cpu)) << what << ": other bits than the CPU's";
#else
  ASSERT_EQ(cuda.size(), cpu.size());
  const double tolerance = sizeof(T) == 4 ? 1e-5 : 1e-12;
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_NEAR(cuda[i], cpu[i], tolerance * (1 + std::abs(cpu[i]))) << what << " at " << i;
  }
#endif
}

#if REMAT_CUDA_EMULATION
constexpr bool kEmulated = true;
#else
constexpr bool kEmulated = false;
#endif

// Grids run so far, after the work queued on GPU 0's stream (the emulated
// GPU counts a grid when it runs).
uint64_t grids_run() {
#if REMAT_CUDA_EMULATION
  kernels::cuda::synchronize(kernels::cuda::compute_stream(0));
  return remat_emulation::counters().grids;
#else
  return 0;
#endif
}

// Three AdamW steps on the CPU, on CUDA (multi-tensor) and on CUDA one
// adamw_step launch a parameter; parameter 0 has no gradient at step 2, so
// the step counts differ.
template <class T>
void adamw_parity() {
  const AdamWOptions options{.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  Generator generator(17);
  std::vector<Tensor> host_init;
  for (int64_t n : kSizes) host_init.push_back(uniform({n}, -1, 1, dtype_of<T>(), generator));
  std::vector<Tensor> cpu, cuda, single;
  for (const Tensor& h : host_init) {
    cpu.push_back(leaf_on(h, Device::cpu()));
    cuda.push_back(leaf_on(h, Device::cuda(0)));
    single.push_back(leaf_on(h, Device::cuda(0)));
  }
  AdamW cpu_adamw(cpu, options), cuda_adamw(cuda, options);
  std::vector<Tensor> m, v;  // the per-launch reference's state
  std::vector<int64_t> steps(kSizes.size(), 0);
  for (int64_t n : kSizes) {
    m.push_back(zeros({n}, dtype_of<T>(), Device::cuda(0)));
    v.push_back(zeros({n}, dtype_of<T>(), Device::cuda(0)));
  }
  for (int step = 1; step <= 3; ++step) {
    for (size_t i = 0; i < kSizes.size(); ++i) {
      if (step == 2 && i == 0) {
        cpu[i].set_grad(Tensor());
        cuda[i].set_grad(Tensor());
        continue;
      }
      const Tensor g = uniform({kSizes[i]}, -1, 1, dtype_of<T>(), generator);
      cpu[i].set_grad(g);
      cuda[i].set_grad(to(g, Device::cuda(0)));
      const Tensor g_cuda = to(g, Device::cuda(0));
      const double t = static_cast<double>(++steps[i]);
      kernels::AdamwHyper hyper;
      hyper.lr = options.lr;
      hyper.beta1 = options.beta1;
      hyper.beta2 = options.beta2;
      hyper.eps = options.eps;
      hyper.weight_decay = options.weight_decay;
      hyper.step_size = options.lr / (1.0 - std::pow(options.beta1, t));
      hyper.bias_correction2_sqrt = std::sqrt(1.0 - std::pow(options.beta2, t));
      kernels::cuda::adamw_step<T>(single[i].data<T>(), m[i].data<T>(), v[i].data<T>(), g_cuda.data<T>(), kSizes[i],
                                   hyper, kernels::cuda::compute_stream(0));
    }
    cpu_adamw.step();
    const uint64_t before = grids_run();
    cuda_adamw.step();
    if (step > 1 && kEmulated) {  // the first step also fills the new state with zeros
      EXPECT_EQ(grids_run() - before, 1u) << "AdamW launches at step " << step;
    }
  }
  for (size_t i = 0; i < kSizes.size(); ++i) {
    const std::string what = "parameter " + std::to_string(i) + " (" + std::to_string(kSizes[i]) + ")";
    EXPECT_EQ(cuda_adamw.step_count(i), i == 0 ? 2 : 3);
    EXPECT_TRUE(same_bits(host_values<T>(cuda[i]), host_values<T>(single[i]))) << what << ": multi vs one launch";
    EXPECT_TRUE(same_bits(host_values<T>(cuda_adamw.exp_avg(i)), host_values<T>(m[i]))) << what;
    EXPECT_TRUE(same_bits(host_values<T>(cuda_adamw.exp_avg_sq(i)), host_values<T>(v[i]))) << what;
    expect_as_cpu(host_values<T>(cuda[i]), host_values<T>(cpu[i]), what);
    expect_as_cpu(host_values<T>(cuda_adamw.exp_avg(i)), host_values<T>(cpu_adamw.exp_avg(i)), what + " exp_avg");
    expect_as_cpu(host_values<T>(cuda_adamw.exp_avg_sq(i)), host_values<T>(cpu_adamw.exp_avg_sq(i)),
                  what + " exp_avg_sq");
  }
}

TEST(CudaOptim, AdamWMultiTensorMatchesOneLaunchAParameterAndTheCpu) {
  REMAT_SKIP_WITHOUT_GPU("CUDA optimizers");
  adamw_parity<float>();
  adamw_parity<double>();
}

TEST(CudaOptim, AdamWGroupsByDtype) {
  REMAT_SKIP_WITHOUT_GPU("CUDA optimizers");
  Generator generator(5);
  std::vector<Tensor> cpu, cuda;
  for (size_t i = 0; i < 6; ++i) {
    const Tensor h = uniform({static_cast<int64_t>(100 * i + 3)}, -1, 1, i % 2 ? DType::Float64 : DType::Float32,
                             generator);
    cpu.push_back(leaf_on(h, Device::cpu()));
    cuda.push_back(leaf_on(h, Device::cuda(0)));
  }
  AdamW cpu_adamw(cpu, {}), cuda_adamw(cuda, {});
  for (int step = 1; step <= 2; ++step) {
    for (size_t i = 0; i < cpu.size(); ++i) {
      const Tensor g = uniform(cpu[i].shape(), -1, 1, cpu[i].dtype(), generator);
      cpu[i].set_grad(g);
      cuda[i].set_grad(to(g, Device::cuda(0)));
    }
    cpu_adamw.step();
    const uint64_t before = grids_run();
    cuda_adamw.step();
    if (step > 1 && kEmulated) {
      EXPECT_EQ(grids_run() - before, 2u) << "a launch a dtype";
    }
  }
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (i % 2) {
      expect_as_cpu(host_values<double>(cuda[i]), host_values<double>(cpu[i]), "float64 parameter");
    } else {
      expect_as_cpu(host_values<float>(cuda[i]), host_values<float>(cpu[i]), "float32 parameter");
    }
  }
}

// Parameters of kSizes on `device` with gradients from `grads` (host).
std::vector<Tensor> with_grads(const std::vector<Tensor>& grads, Device device) {
  std::vector<Tensor> params;
  for (const Tensor& g : grads) {
    Tensor p = leaf_on(zeros(g.shape(), g.dtype()), device);
    p.set_grad(device.is_cpu() ? contiguous_copy(g) : to(g, device));  // never `grads` itself
    params.push_back(p);
  }
  return params;
}

// The old CUDA path: each gradient's squared_norm to the host, added in order.
double per_gradient_norm(const std::vector<Tensor>& params) {
  double squares = 0;
  for (const Tensor& p : params) {
    squares += kernels::cuda::squared_norm<float>(p.grad().data<float>(), p.numel(), kernels::cuda::compute_stream(0));
  }
  return std::sqrt(squares);
}

TEST(CudaOptim, ClipGradNormKeepsTheNormOnTheGpu) {
  REMAT_SKIP_WITHOUT_GPU("CUDA optimizers");
  Generator generator(3);
  std::vector<Tensor> grads;
  for (int64_t n : kSizes) grads.push_back(uniform({n}, -1, 1, DType::Float32, generator));
  const std::vector<Tensor> cpu = with_grads(grads, Device::cpu()), cuda = with_grads(grads, Device::cuda(0));
  const double expected = per_gradient_norm(cuda);
  const uint64_t before = grids_run();
  const double norm = clip_grad_norm(cuda, 1.0);
  if (kEmulated) {
    EXPECT_EQ(grids_run() - before, 3u) << "partials, coefficient, scale";
  }
  EXPECT_EQ(norm, expected) << "the old per-gradient sums, bit for bit";
  const double cpu_norm = clip_grad_norm(cpu, 1.0);
  EXPECT_NEAR(norm, cpu_norm, 1e-12 * cpu_norm);
  const float coef = static_cast<float>(1.0 / (norm + 1e-6));
  for (size_t i = 0; i < grads.size(); ++i) {
    std::vector<float> scaled = grads[i].to_vector<float>();
    for (float& x : scaled) x = x * coef;
    EXPECT_TRUE(same_bits(host_values<float>(cuda[i].grad()), scaled)) << "gradient " << i;
  }
}

TEST(CudaOptim, ClipGradNormMatchesTheCpuBitForBitWhereSumsAreExact) {
  REMAT_SKIP_WITHOUT_GPU("CUDA optimizers");
  // Multiples of 1/16 below 4: every square and every partial sum is exact
  // in double, so any order of the additions gives the CPU's bits.
  std::vector<Tensor> grads;
  int k = 0;
  for (int64_t n : kSizes) {
    std::vector<double> values(static_cast<size_t>(n));
    for (double& x : values) x = ((k++ * 37) % 128 - 64) / 16.0;
    grads.push_back(from_vector(values, {n}));
  }
  for (double max_norm : {0.5, 1e9}) {  // a clip, and none (the gradients keep their bits)
    const std::vector<Tensor> cpu = with_grads(grads, Device::cpu()), cuda = with_grads(grads, Device::cuda(0));
    EXPECT_EQ(clip_grad_norm(cuda, max_norm), clip_grad_norm(cpu, max_norm)) << max_norm;
    for (size_t i = 0; i < grads.size(); ++i) {
      EXPECT_TRUE(same_bits(host_values<double>(cuda[i].grad()), cpu[i].grad().to_vector<double>()))
          << "gradient " << i << ", max_norm " << max_norm;
    }
  }
}

TEST(CudaOptim, ClipGradNormNanReachesEveryGradient) {
  REMAT_SKIP_WITHOUT_GPU("CUDA optimizers");
  Generator generator(4);
  std::vector<Tensor> grads;
  for (int64_t n : kSizes) grads.push_back(uniform({n}, -1, 1, DType::Float32, generator));
  std::vector<float> poisoned = grads[3].to_vector<float>();
  poisoned[12345] = std::numeric_limits<float>::quiet_NaN();
  grads[3] = from_vector(poisoned, grads[3].shape());
  const std::vector<Tensor> cuda = with_grads(grads, Device::cuda(0));
  EXPECT_TRUE(std::isnan(clip_grad_norm(cuda, 1.0)));
  for (const Tensor& p : cuda) {
    for (float x : host_values<float>(p.grad())) ASSERT_TRUE(std::isnan(x));
  }
}

TEST(CudaOptim, ClipGradNormOverMixedDtypes) {
  REMAT_SKIP_WITHOUT_GPU("CUDA optimizers");
  Generator generator(6);
  std::vector<Tensor> grads;
  for (size_t i = 0; i < 4; ++i) {
    grads.push_back(uniform({static_cast<int64_t>(1000 * i + 7)}, -1, 1, i % 2 ? DType::Float64 : DType::Float32,
                            generator));
  }
  const std::vector<Tensor> cpu = with_grads(grads, Device::cpu()), cuda = with_grads(grads, Device::cuda(0));
  const double norm = clip_grad_norm(cuda, 0.1), cpu_norm = clip_grad_norm(cpu, 0.1);
  EXPECT_NEAR(norm, cpu_norm, 1e-12 * cpu_norm);
  for (size_t i = 0; i < grads.size(); ++i) {
    if (i % 2) {
      const std::vector<double> a = host_values<double>(cuda[i].grad()), b = cpu[i].grad().to_vector<double>();
      for (size_t j = 0; j < a.size(); ++j) ASSERT_NEAR(a[j], b[j], 1e-12);
    } else {
      const std::vector<float> a = host_values<float>(cuda[i].grad()), b = cpu[i].grad().to_vector<float>();
      for (size_t j = 0; j < a.size(); ++j) ASSERT_NEAR(a[j], b[j], 1e-6);
    }
  }
}

}  // namespace
}  // namespace remat::optim

#endif  // REMAT_HAVE_CUDA
