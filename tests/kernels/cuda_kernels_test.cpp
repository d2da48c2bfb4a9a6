// Each CUDA kernel against its CPU twin on the same inputs (label cuda;
// skipped, with a message, where no GPU is present or the build has no
// CUDA): float32 within 1e-5 relative, float64 within 1e-12; the dropout
// masks and the optimizer updates of both devices the same elements.
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/dropout.h"
#include "kernels/cpu/optim.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/unary.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/unary.h"
#include "tests/support/gpu.h"

namespace remat::kernels {
namespace {

namespace cpu_k = kernels::cpu;
namespace cuda_k = kernels::cuda;

// A buffer on GPU 0 holding `values`, freed at scope exit.
template <class T>
struct DeviceBuffer {
  explicit DeviceBuffer(const std::vector<T>& values) : n(values.size()) {
    ptr = static_cast<T*>(cuda_k::device_malloc(std::max<size_t>(n, 1) * sizeof(T), 0));
    if (n) cuda_k::copy_host_to_device(ptr, values.data(), n * sizeof(T), stream());
  }
  ~DeviceBuffer() { cuda_k::device_free(ptr, 0); }
  std::vector<T> read() const {
    std::vector<T> out(n);
    if (n) cuda_k::copy_device_to_host(out.data(), ptr, n * sizeof(T), stream());
    return out;
  }
  static cuda_k::Stream stream() { return cuda_k::compute_stream(0); }
  size_t n;
  T* ptr = nullptr;
};

template <class T>
std::vector<T> random_values(size_t n, double low, double high, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> draw(low, high);
  std::vector<T> out(n);
  for (T& v : out) v = static_cast<T>(draw(rng));
  return out;
}

template <class T>
void expect_close(const std::vector<T>& cuda, const std::vector<T>& cpu, const char* what) {
  const double tolerance = sizeof(T) == 4 ? 1e-5 : 1e-12;
  ASSERT_EQ(cuda.size(), cpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double scale = std::max(1.0, std::abs(static_cast<double>(cpu[i])));
    ASSERT_NEAR(cuda[i], cpu[i], tolerance * scale) << what << " at " << i;
  }
}

// n elements: more than one grid's worth, and not a multiple of a block.
constexpr size_t kN = 4096 * 256 + 77;

template <class T>
void unary_parity() {
  const std::vector<T> x = random_values<T>(kN, -4, 4, 1), positive = random_values<T>(kN, 0.1, 4, 2);
  const std::vector<T> dout = random_values<T>(kN, -1, 1, 3);
  const auto run = [&](const char* what, const std::vector<T>& in, auto cpu_f, auto cuda_f) {
    std::vector<T> cpu(kN);
    cpu_f(cpu.data(), in.data(), static_cast<int64_t>(kN));
    DeviceBuffer<T> d_in(in), d_out{std::vector<T>(kN)};
    cuda_f(d_out.ptr, d_in.ptr, static_cast<int64_t>(kN));
    expect_close(d_out.read(), cpu, what);
  };
  const cuda_k::Stream s = DeviceBuffer<T>::stream();
#define REMAT_FORWARD(name, in)                                                                                       \
  run(#name, in, [](T* o, const T* i, int64_t n) { cpu_k::name<T>(o, i, n); },                                       \
      [s](T* o, const T* i, int64_t n) { cuda_k::name<T>(o, i, n, s); })
  REMAT_FORWARD(neg_forward, x);
  REMAT_FORWARD(relu_forward, x);
  REMAT_FORWARD(tanh_forward, x);
  REMAT_FORWARD(sigmoid_forward, x);
  REMAT_FORWARD(exp_forward, x);
  REMAT_FORWARD(log_forward, positive);
  REMAT_FORWARD(gelu_forward, x);
#undef REMAT_FORWARD
  // Backward kernels read dout and the saved value (x, or the output).
  const auto run_backward = [&](const char* what, const std::vector<T>& saved, auto cpu_b, auto cuda_b) {
    std::vector<T> cpu(kN);
    cpu_b(cpu.data(), dout.data(), saved.data(), static_cast<int64_t>(kN));
    DeviceBuffer<T> d_dout(dout), d_saved(saved), d_dx{std::vector<T>(kN)};
    cuda_b(d_dx.ptr, d_dout.ptr, d_saved.ptr, static_cast<int64_t>(kN));
    expect_close(d_dx.read(), cpu, what);
  };
  const std::vector<T> unit = random_values<T>(kN, 0.01, 0.99, 4);  // an output of sigmoid or tanh
#define REMAT_BACKWARD(name, saved)                                                                                   \
  run_backward(#name, saved, [](T* d, const T* g, const T* v, int64_t n) { cpu_k::name<T>(d, g, v, n); },            \
               [s](T* d, const T* g, const T* v, int64_t n) { cuda_k::name<T>(d, g, v, n, s); })
  REMAT_BACKWARD(relu_backward, x);
  REMAT_BACKWARD(tanh_backward, unit);
  REMAT_BACKWARD(sigmoid_backward, unit);
  REMAT_BACKWARD(exp_backward, positive);
  REMAT_BACKWARD(log_backward, positive);
  REMAT_BACKWARD(gelu_backward, x);
#undef REMAT_BACKWARD
}

TEST(CudaKernels, UnaryKernelsMatchTheCpu) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  unary_parity<float>();
  unary_parity<double>();
}

TEST(CudaKernels, FillAndScaleMatchTheCpu) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const std::vector<float> x = random_values<float>(kN, -2, 2, 5);
  DeviceBuffer<float> d_x(x), d_out{std::vector<float>(kN)};
  cuda_k::scale<float>(d_out.ptr, d_x.ptr, -1.5f, static_cast<int64_t>(kN), d_x.stream());
  std::vector<float> cpu(kN);
  cpu_k::scale<float>(cpu.data(), x.data(), -1.5f, static_cast<int64_t>(kN));
  EXPECT_EQ(d_out.read(), cpu);  // one multiply: the same bits
  DeviceBuffer<int64_t> d_ids{std::vector<int64_t>(1000)};
  cuda_k::fill<int64_t>(d_ids.ptr, 7, 1000, d_ids.stream());
  EXPECT_EQ(d_ids.read(), std::vector<int64_t>(1000, 7));
}

TEST(CudaKernels, DropoutKeepsTheSameElementsAsTheCpu) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const std::vector<float> x = random_values<float>(kN, -2, 2, 6);
  const DropoutMask mask{.seed = 12345, .offset = 678, .threshold = static_cast<uint32_t>(std::ceil(0.3 * 16777216.0))};
  std::vector<float> cpu(kN);
  cpu_k::dropout_forward<float>(cpu.data(), x.data(), static_cast<int64_t>(kN), mask, 1.0f / 0.7f);
  DeviceBuffer<float> d_x(x), d_out{std::vector<float>(kN)};
  cuda_k::dropout_forward<float>(d_out.ptr, d_x.ptr, static_cast<int64_t>(kN), mask, 1.0f / 0.7f, d_x.stream());
  EXPECT_EQ(d_out.read(), cpu);  // the same mask, the same one multiply
}

TEST(CudaKernels, OptimizerStepsMatchTheCpu) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const size_t n = 100003;
  std::vector<double> param = random_values<double>(n, -1, 1, 7), grad = random_values<double>(n, -1, 1, 8);
  std::vector<double> m = random_values<double>(n, -0.1, 0.1, 9), v = random_values<double>(n, 0, 0.01, 10);
  const AdamwHyper hyper{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
                         .step_size = 1e-3 / (1 - 0.9 * 0.9), .bias_correction2_sqrt = std::sqrt(1 - 0.95 * 0.95)};
  DeviceBuffer<double> d_param(param), d_m(m), d_v(v), d_grad(grad);
  cuda_k::adamw_step<double>(d_param.ptr, d_m.ptr, d_v.ptr, d_grad.ptr, static_cast<int64_t>(n), hyper, d_m.stream());
  cpu_k::adamw_step<double>(param.data(), m.data(), v.data(), grad.data(), static_cast<int64_t>(n), hyper);
  expect_close(d_param.read(), param, "adamw param");
  expect_close(d_m.read(), m, "adamw exp_avg");
  expect_close(d_v.read(), v, "adamw exp_avg_sq");

  std::vector<float> p32 = random_values<float>(n, -1, 1, 11), g32 = random_values<float>(n, -1, 1, 12);
  std::vector<float> buf(n);
  const SgdHyper sgd{.lr = 0.1, .momentum = 0.9, .dampening = 0, .weight_decay = 0.01, .nesterov = true};
  DeviceBuffer<float> d_p(p32), d_g(g32), d_buf(buf);
  cuda_k::sgd_step<float>(d_p.ptr, d_buf.ptr, d_g.ptr, static_cast<int64_t>(n), sgd, true, d_p.stream());
  cpu_k::sgd_step<float>(p32.data(), buf.data(), g32.data(), static_cast<int64_t>(n), sgd, true);
  expect_close(d_p.read(), p32, "sgd param");
  expect_close(d_buf.read(), buf, "sgd momentum");
}

TEST(CudaKernels, SquaredNormMatchesTheCpuAndRepeats) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const std::vector<float> x = random_values<float>(kN, -1, 1, 13);
  DeviceBuffer<float> d_x(x);
  const double cuda = cuda_k::squared_norm<float>(d_x.ptr, static_cast<int64_t>(kN), d_x.stream());
  const double cpu = cpu_k::squared_norm<float>(x.data(), static_cast<int64_t>(kN));
  EXPECT_NEAR(cuda, cpu, 1e-12 * cpu);
  EXPECT_EQ(cuda_k::squared_norm<float>(d_x.ptr, static_cast<int64_t>(kN), d_x.stream()), cuda);  // bit for bit
}

}  // namespace
}  // namespace remat::kernels

#else

TEST(CudaKernels, NeedACudaBuild) { GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): CUDA kernels not built"; }

#endif
