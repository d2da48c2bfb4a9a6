// TF32 as a flag (kernels/cuda/gemm.h, set_allow_tf32), label cuda: off, a
// float GEMM matches the CPU's float32 product; on, it matches the CPU's
// product of TF32-rounded inputs (10 mantissa bits, to nearest, ties away
// from zero, as cvt.rna.tf32.f32) and differs from float32 by about 1e-4 to
// 1e-3 of the largest output; double GEMMs are unaffected.
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/runtime.h"
#include "tests/support/gpu.h"

namespace remat::kernels {
namespace {

namespace cpu_k = kernels::cpu;
namespace cuda_k = kernels::cuda;

using test::stream;

using test::random_values;

float tf32(float x) {  // the test's own rounding, independent of the emulator's
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint32_t sign = bits & 0x80000000u, magnitude = bits & 0x7fffffffu;
  const uint32_t rounded = (magnitude + (1u << 12)) >> 13 << 13;  // half of the last kept bit, then truncate
  bits = sign | rounded;
  std::memcpy(&x, &bits, 4);
  return x;
}

// C (m, n) = A (m, k) B (k, n) on GPU 0, row-major.
template <class T>
std::vector<T> gpu_product(const std::vector<T>& a, const std::vector<T>& b, int64_t m, int64_t n, int64_t k) {
  auto* da = static_cast<T*>(cuda_k::device_malloc(a.size() * sizeof(T), 0));
  auto* db = static_cast<T*>(cuda_k::device_malloc(b.size() * sizeof(T), 0));
  auto* dc = static_cast<T*>(cuda_k::device_malloc(static_cast<size_t>(m * n) * sizeof(T), 0));
  cuda_k::copy_host_to_device(da, a.data(), a.size() * sizeof(T), stream());
  cuda_k::copy_host_to_device(db, b.data(), b.size() * sizeof(T), stream());
  cuda_k::gemm<T>(false, false, m, n, k, T(1), da, k, db, n, T(0), dc, n, stream());
  std::vector<T> c(static_cast<size_t>(m * n));
  cuda_k::copy_device_to_host(c.data(), dc, c.size() * sizeof(T), stream());
  for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dc)}) cuda_k::device_free(p, 0);
  return c;
}

template <class T>
std::vector<T> cpu_product(const std::vector<T>& a, const std::vector<T>& b, int64_t m, int64_t n, int64_t k) {
  std::vector<T> c(static_cast<size_t>(m * n));
  cpu_k::gemm<T>(false, false, m, n, k, T(1), a.data(), k, b.data(), n, T(0), c.data(), n);
  return c;
}

// max |x - y| over max |y|.
using test::relative_gap;

struct Tf32Scope {  // the process's setting back to off, whatever the test did
  explicit Tf32Scope(bool on) { cuda_k::set_allow_tf32(on); }
  ~Tf32Scope() { cuda_k::set_allow_tf32(false); }
};

TEST(CudaGemm, Tf32IsOffByDefaultAndRoundsTheInputsWhenOn) {
  REMAT_SKIP_WITHOUT_GPU("CUDA GEMM");
  EXPECT_FALSE(cuda_k::allow_tf32());
  const int64_t m = 67, n = 80, k = 301;
  const std::vector<float> a = random_values<float>(static_cast<size_t>(m * k), 1);
  const std::vector<float> b = random_values<float>(static_cast<size_t>(k * n), 2);
  const std::vector<float> fp32 = cpu_product(a, b, m, n, k);
  std::vector<float> a_tf32(a), b_tf32(b);
  for (float& v : a_tf32) v = tf32(v);
  for (float& v : b_tf32) v = tf32(v);
  const std::vector<float> rounded = cpu_product(a_tf32, b_tf32, m, n, k);
  const std::vector<float> off = gpu_product(a, b, m, n, k);
  EXPECT_LE(relative_gap(off, fp32), 1e-5);
  std::vector<float> on;
  {
    const Tf32Scope scope(true);
    on = gpu_product(a, b, m, n, k);
  }
  EXPECT_LE(relative_gap(on, rounded), 1e-5) << "TF32 on: the product of the rounded inputs";
  const double gap = relative_gap(on, fp32);
  EXPECT_GE(gap, 1e-5) << "TF32 on gave float32's product: the flag did not reach cuBLAS";
  EXPECT_LE(gap, 1e-2);
  EXPECT_LE(relative_gap(gpu_product(a, b, m, n, k), fp32), 1e-5) << "TF32 stayed on";
}

TEST(CudaGemm, Tf32LeavesDoubleGemmsAlone) {
  REMAT_SKIP_WITHOUT_GPU("CUDA GEMM");
  const int64_t m = 33, n = 20, k = 50;
  const std::vector<double> a = random_values<double>(static_cast<size_t>(m * k), 3);
  const std::vector<double> b = random_values<double>(static_cast<size_t>(k * n), 4);
  const std::vector<double> off = gpu_product(a, b, m, n, k);
  const Tf32Scope scope(true);
  EXPECT_EQ(gpu_product(a, b, m, n, k), off);
}

}  // namespace
}  // namespace remat::kernels

#else

TEST(CudaGemm, NeedACudaBuild) { GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): CUDA GEMM not built"; }

#endif
