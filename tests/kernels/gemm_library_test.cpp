// The GEMM library (kernels/cpu/gemm_library.h): its kernels use every
// instruction the CPU offers, BLIS's sub-configurations map to their levels,
// float and double GEMM agree with plain loops for every layout, and the
// thread count's range.
#include "kernels/cpu/gemm_library.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"

namespace remat::kernels::cpu {
namespace {

TEST(GemmLibrary, BlisConfigurationsMapToTheirLevels) {
  EXPECT_EQ(blis_config_level("skx"), IsaLevel::Avx512);
  EXPECT_EQ(blis_config_level("knl"), IsaLevel::Avx2);  // AVX-512F without BW, DQ, VL
  EXPECT_EQ(blis_config_level("haswell"), IsaLevel::Avx2);
  EXPECT_EQ(blis_config_level("zen3"), IsaLevel::Avx2);
  EXPECT_EQ(blis_config_level("sandybridge"), IsaLevel::Avx);
  EXPECT_EQ(blis_config_level("penryn"), IsaLevel::Baseline);
  EXPECT_EQ(blis_config_level("generic"), IsaLevel::Baseline);
  EXPECT_EQ(blis_config_level("something_new"), IsaLevel::Baseline);  // unknown: claims nothing
}

TEST(GemmLibrary, EachLevelAsksForAConfigurationOfThatLevel) {
  for (IsaLevel level : {IsaLevel::Baseline, IsaLevel::Avx, IsaLevel::Avx2, IsaLevel::Avx512}) {
    EXPECT_EQ(blis_config_level(blis_config_for(level)), level) << blis_config_for(level);
  }
}

// On this machine, by CPUID feature bits: the GEMM kernels in use are as
// wide as the CPU (OpenBLAS 0.3.21 ran SSE kernels on the AVX-512 Xeon of
// family 6, model 207, when CBC's LAPACK had loaded it first: issue 31).
// A choice the user forced (BLIS_ARCH_TYPE) fails it too, by name.
TEST(GemmLibrary, KernelsUseEveryInstructionTheCpuOffers) {
  const GemmInfo info = gemm_info();
  EXPECT_GE(info.kernel_level, info.cpu_level) << gemm_summary();
  EXPECT_EQ(info.choice, "cpu-features") << gemm_summary();
  EXPECT_EQ(info.kernels, blis_config_for(info.cpu_level)) << gemm_summary();
  EXPECT_EQ(info.runtime, "OpenMP") << "BLIS's threads are not remat's: " << gemm_summary();
  EXPECT_EQ(info.library.rfind("BLIS ", 0), 0u) << info.library;
}

TEST(GemmLibrary, FloatGemmRunsThroughTheLibrary) {
  // (2, 3) x (3, 2), row-major
  const float a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, 11, 12};
  float c[4] = {};
  gemm<float>(false, false, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2);
  EXPECT_EQ(c[0], 58);
  EXPECT_EQ(c[1], 64);
  EXPECT_EQ(c[2], 139);
  EXPECT_EQ(c[3], 154);
}

// Every transpose, strides wider than the rows, alpha and beta, for both
// types, against a plain triple loop, at sizes that take BLIS's small-
// matrix path and its packed one.
template <class T>
void expect_gemm_matches_loops(int64_t m, int64_t n, int64_t k, double tolerance) {
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
      std::vector<T> a(static_cast<size_t>((ta ? k : m) * lda)), b(static_cast<size_t>((tb ? n : k) * ldb));
      std::vector<T> c(static_cast<size_t>(m * ldc)), want;
      for (size_t i = 0; i < a.size(); ++i) a[i] = T(std::sin(0.37 * static_cast<double>(i)));
      for (size_t i = 0; i < b.size(); ++i) b[i] = T(std::cos(0.21 * static_cast<double>(i)));
      for (size_t i = 0; i < c.size(); ++i) c[i] = T(0.5 * static_cast<double>(i % 7));
      want = c;
      const T alpha = T(1.5), beta = T(-0.25);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < k; ++p) {
            sum += double(ta ? a[p * lda + i] : a[i * lda + p]) * double(tb ? b[j * ldb + p] : b[p * ldb + j]);
          }
          want[i * ldc + j] = T(alpha * sum + beta * want[i * ldc + j]);
        }
      }
      gemm<T>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          ASSERT_NEAR(c[i * ldc + j], want[i * ldc + j], tolerance) << "(" << i << ", " << j << "), trans_a " << ta
                                                                    << ", trans_b " << tb << ", " << m << "x" << n
                                                                    << "x" << k;
        }
      }
    }
  }
}

TEST(GemmLibrary, FloatAndDoubleGemmMatchLoopsForEveryLayout) {
  NumThreadsGuard two(2);
  expect_gemm_matches_loops<float>(5, 7, 3, 1e-5);
  expect_gemm_matches_loops<float>(33, 65, 129, 1e-3);
  expect_gemm_matches_loops<double>(5, 7, 3, 1e-12);
  expect_gemm_matches_loops<double>(70, 300, 80, 1e-11);
  expect_gemm_matches_loops<float>(300, 260, 270, 2e-3);
}

TEST(GemmLibrary, BetaZeroWritesWithoutReading) {
  const double a[] = {1, 2}, b[] = {3, 4};
  double c[] = {NAN};
  gemm<double>(false, false, 1, 1, 2, 1.0, a, 2, b, 1, 0.0, c, 1);
  EXPECT_EQ(c[0], 11);
  float cf[] = {NAN};
  gemm<float>(false, false, 1, 1, 0, 1.0f, nullptr, 1, nullptr, 1, 0.0f, cf, 1);  // K = 0: beta * C = 0
  EXPECT_EQ(cf[0], 0);
}

// BLIS splits the output, never the sum over k, among threads: a GEMM's
// bits do not depend on the thread count (nor on where its buffers lie).
template <class T>
void expect_same_on_one_and_two_threads() {
  const int64_t m = 512, n = 640, k = 600;  // BLIS's packed path on one thread
  std::vector<T> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = T(std::sin(static_cast<double>(i)));
  for (size_t i = 0; i < b.size(); ++i) b[i] = T(std::cos(static_cast<double>(i)));
  std::vector<T> one(static_cast<size_t>(m * n)), two(one.size() + 5);
  {
    NumThreadsGuard threads(1);
    gemm<T>(false, true, m, n, k, T(1), a.data(), k, b.data(), k, T(0), one.data(), n);
  }
  {
    NumThreadsGuard threads(2);
    gemm<T>(false, true, m, n, k, T(1), a.data(), k, b.data(), k, T(0), two.data() + 5, n);
  }
  EXPECT_TRUE(std::equal(one.begin(), one.end(), two.begin() + 5));
}

TEST(GemmLibrary, GemmIsTheSameOnOneAndTwoThreads) {
  expect_same_on_one_and_two_threads<float>();
  expect_same_on_one_and_two_threads<double>();
}

TEST(GemmLibrary, ThreadCountsOutsideTheRangeAreErrors) {
  NumThreadsGuard keep(num_threads());
  for (int bad : {0, -1, kMaxThreads + 1, 100000}) {
    try {
      set_num_threads(bad);
      ADD_FAILURE() << bad << " threads were accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
    }
  }
  set_num_threads(2);
  EXPECT_EQ(num_threads(), 2);
  EXPECT_EQ(gemm_info().threads, 2);
}

}  // namespace
}  // namespace remat::kernels::cpu
