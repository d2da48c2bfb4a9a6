// The GEMM library (kernels/cpu/gemm_library.h): the choice is the table's
// row for this CPU and its kernels use every instruction the CPU offers,
// BLIS's sub-configurations map to their levels, float and double GEMM agree
// with a float64 sum for every layout, beta and block edge, their bits do
// not depend on the thread count nor on a parallel region around the call,
// and the thread count's range. tests/CMakeLists.txt runs these once more
// for each library (REMAT_GEMM=blis, REMAT_GEMM=onednn).
#include "kernels/cpu/gemm_library.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
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

TEST(GemmLibrary, TheChoiceIsOneMeasuredRowPerKindOfCpu) {
  ASSERT_EQ(gemm_choices().size(), 4u);
  for (IsaLevel level : {IsaLevel::Baseline, IsaLevel::Avx, IsaLevel::Avx2, IsaLevel::Avx512}) {
    const auto row = std::find_if(gemm_choices().begin(), gemm_choices().end(),
                                  [&](const GemmChoice& choice) { return choice.cpu == level; });
    ASSERT_NE(row, gemm_choices().end()) << isa_name(level);
    EXPECT_FALSE(row->measured.empty()) << isa_name(level);
    EXPECT_EQ(gemm_library_for(level), row->library) << isa_name(level);
  }
}

TEST(GemmLibrary, RematGemmNamesALibraryOrIsAnError) {
  EXPECT_EQ(parse_gemm_library("blis"), GemmLibrary::Blis);
  EXPECT_EQ(parse_gemm_library("onednn"), GemmLibrary::OneDnn);
  for (const char* bad : {"BLIS", "mkl", "onednn ", "openblas"}) {
    try {
      parse_gemm_library(bad);
      ADD_FAILURE() << "REMAT_GEMM=" << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("REMAT_GEMM=") + bad + " names no"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("blis or onednn"), std::string::npos) << e.what();
    }
  }
}

// On this machine, by CPUID feature bits: float32 runs on the table's
// library for this CPU, and the kernels in use are as wide as the CPU
// (OpenBLAS 0.3.21 ran SSE kernels on the AVX-512 Xeon of family 6, model
// 207, when CBC's LAPACK had loaded it first: issue 31). For oneDNN that
// is its effective ISA (avx512_core on AVX-512), for BLIS its
// sub-configuration, for float64 BLIS's. A choice the user forced
// (REMAT_GEMM, BLIS_ARCH_TYPE, ONEDNN_MAX_CPU_ISA) fails it by name, but
// for REMAT_GEMM alone, which tests/CMakeLists.txt sets to run every test
// here on each library.
TEST(GemmLibrary, KernelsUseEveryInstructionTheCpuOffers) {
  const GemmInfo info = gemm_info();
  const char* forced = std::getenv("REMAT_GEMM");
  const bool forced_library = forced != nullptr && *forced != '\0';
  EXPECT_EQ(info.float32, forced_library ? parse_gemm_library(forced) : gemm_library_for(info.cpu_level))
      << gemm_summary();
  EXPECT_EQ(info.choice, forced_library ? std::string("REMAT_GEMM=") + forced : "cpu-features") << gemm_summary();
  EXPECT_GE(info.kernel_level, info.cpu_level) << gemm_summary();
  EXPECT_EQ(info.runtime, "OpenMP") << "the library's threads are not remat's: " << gemm_summary();
  if (info.float32 == GemmLibrary::Blis) {
    EXPECT_EQ(info.library.rfind("BLIS ", 0), 0u) << info.library;
    EXPECT_EQ(info.kernels, blis_config_for(info.cpu_level)) << gemm_summary();
  } else {
    EXPECT_EQ(info.library.rfind("oneDNN ", 0), 0u) << info.library;
  }
  const std::string blis_kernels = ", " + std::string(blis_config_for(info.cpu_level)) + " kernels";
  EXPECT_TRUE(info.float64.ends_with(blis_kernels)) << gemm_summary();
  EXPECT_EQ(info.float64.rfind("BLIS ", 0), 0u) << info.float64;
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

// Every transpose, strides wider than the rows, alpha and three betas, for
// both types, against a float64 sum, at sizes that take each library's
// small-matrix path and its packed one, oneDNN's blocks with ragged last
// edges (above 1024 rows or columns), and its narrow transposed B that
// gemm.cpp copies to (K, N) first (from 1024 rows, up to 512 columns).
template <class T>
void expect_gemm_matches_float64(int64_t m, int64_t n, int64_t k, double tolerance) {
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      for (const double beta : {0.0, 1.0, -0.25}) {
        const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
        std::vector<T> a(static_cast<size_t>((ta ? k : m) * lda)), b(static_cast<size_t>((tb ? n : k) * ldb));
        std::vector<T> c(static_cast<size_t>(m * ldc));
        for (size_t i = 0; i < a.size(); ++i) a[i] = T(std::sin(0.37 * static_cast<double>(i)));
        for (size_t i = 0; i < b.size(); ++i) b[i] = T(std::cos(0.21 * static_cast<double>(i)));
        for (size_t i = 0; i < c.size(); ++i) c[i] = beta == 0 ? T(NAN) : T(0.5 * static_cast<double>(i % 7));
        std::vector<double> want(c.size());
        const double alpha = 1.5;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0;
            for (int64_t p = 0; p < k; ++p) {
              sum += double(ta ? a[p * lda + i] : a[i * lda + p]) * double(tb ? b[j * ldb + p] : b[p * ldb + j]);
            }
            const double before = c[i * ldc + j];
            want[i * ldc + j] = alpha * sum + (beta == 0 ? 0.0 : beta * before);
          }
        }
        gemm<T>(ta, tb, m, n, k, T(alpha), a.data(), lda, b.data(), ldb, T(beta), c.data(), ldc);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            ASSERT_NEAR(c[i * ldc + j], want[i * ldc + j], tolerance)
                << "(" << i << ", " << j << "), trans_a " << ta << ", trans_b " << tb << ", beta " << beta << ", "
                << m << "x" << n << "x" << k << "; " << gemm_summary();
          }
        }
      }
    }
  }
}

TEST(GemmLibrary, FloatAndDoubleGemmMatchFloat64ForEveryLayout) {
  NumThreadsGuard two(2);
  expect_gemm_matches_float64<float>(5, 7, 3, 1e-5);
  expect_gemm_matches_float64<float>(1, 9, 4, 1e-5);  // one row: its stride is never stepped
  expect_gemm_matches_float64<float>(33, 65, 129, 1e-3);
  expect_gemm_matches_float64<double>(5, 7, 3, 1e-12);
  expect_gemm_matches_float64<double>(70, 300, 80, 1e-11);
  expect_gemm_matches_float64<float>(300, 260, 270, 2e-3);
  expect_gemm_matches_float64<float>(531, 1043, 37, 1e-3);  // blocks of C with ragged edges
  expect_gemm_matches_float64<float>(1030, 70, 33, 1e-3);   // a narrow transposed B, copied to (K, N) first
}

TEST(GemmLibrary, BetaZeroWritesWithoutReading) {
  const double a[] = {1, 2}, b[] = {3, 4};
  double c[] = {NAN};
  gemm<double>(false, false, 1, 1, 2, 1.0, a, 2, b, 1, 0.0, c, 1);
  EXPECT_EQ(c[0], 11);
  float cf[] = {NAN};
  gemm<float>(false, false, 1, 1, 0, 1.0f, nullptr, 1, nullptr, 1, 0.0f, cf, 1);  // K = 0: beta * C = 0
  EXPECT_EQ(cf[0], 0);
  const float af[] = {1, 2}, bf[] = {3, 4};
  cf[0] = NAN;
  gemm<float>(false, false, 1, 1, 2, 1.0f, af, 2, bf, 1, 0.0f, cf, 1);
  EXPECT_EQ(cf[0], 11) << gemm_summary();
}

// Threads split the output, never the sum over k, and oneDNN's blocks are
// cut from the shape alone: a GEMM's bits do not depend on the thread count
// (nor on where its buffers lie), nor on whether it runs inside a parallel
// region, on one thread. 2304 x 768 x 1024 with A transposed is W2's dW of
// its qkv linear, where one oneDNN call on C and one on each half differ.
template <class T>
void expect_same_on_one_and_two_threads(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  std::vector<T> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
  for (size_t i = 0; i < a.size(); ++i) a[i] = T(std::sin(static_cast<double>(i)));
  for (size_t i = 0; i < b.size(); ++i) b[i] = T(std::cos(static_cast<double>(i)));
  std::vector<T> one(static_cast<size_t>(m * n)), two(one.size() + 5), nested(one.size());
  {
    NumThreadsGuard threads(1);
    gemm<T>(ta, tb, m, n, k, T(1), a.data(), lda, b.data(), ldb, T(0), one.data(), n);
  }
  {
    NumThreadsGuard threads(2);
    gemm<T>(ta, tb, m, n, k, T(1), a.data(), lda, b.data(), ldb, T(0), two.data() + 5, n);
  }
  {
    NumThreadsGuard threads(2);
#pragma omp parallel num_threads(2)
    if (omp_get_thread_num() == 1) {
      gemm<T>(ta, tb, m, n, k, T(1), a.data(), lda, b.data(), ldb, T(0), nested.data(), n);
    }
  }
  const std::string what = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + ", trans_a " +
                           std::to_string(ta) + ", trans_b " + std::to_string(tb) + "; " + gemm_summary();
  EXPECT_TRUE(std::equal(one.begin(), one.end(), two.begin() + 5)) << "1 and 2 threads differ: " << what;
  EXPECT_TRUE(std::equal(one.begin(), one.end(), nested.begin())) << "inside a parallel region: " << what;
}

TEST(GemmLibrary, GemmIsTheSameOnOneAndTwoThreads) {
  expect_same_on_one_and_two_threads<float>(false, true, 512, 640, 600);  // BLIS's packed path on one thread
  expect_same_on_one_and_two_threads<double>(false, true, 512, 640, 600);
  expect_same_on_one_and_two_threads<float>(true, false, 2304, 768, 1024);
  expect_same_on_one_and_two_threads<float>(false, false, 1043, 531, 77);
  // oneDNN's 1024-blocks: W2's c_fc forward (two blocks of rows), an odd
  // count of blocks halved (1 x 3 -> 2 x 3), and one block halved along
  // its columns (W2's dW of c_fc).
  expect_same_on_one_and_two_threads<float>(false, false, 2048, 1024, 256);
  expect_same_on_one_and_two_threads<float>(false, true, 1024, 2304, 96);
  expect_same_on_one_and_two_threads<float>(true, false, 256, 1024, 2048);
  expect_same_on_one_and_two_threads<float>(false, true, 1040, 200, 300);  // B transposed on two threads first
}

// A bias's rows and its gradient's sums, split over rows and columns on two
// threads: the same bits as on one, and each column's sum taken over its
// rows in order (against a plain loop).
TEST(GemmLibrary, BiasRowsAndSumsAreTheSameOnOneAndTwoThreads) {
  const int64_t rows = 2048, n = 771;  // 1.5 M elements: split; n not a multiple of the threads' units
  std::vector<float> x(static_cast<size_t>(rows * n)), row(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  for (size_t j = 0; j < row.size(); ++j) row[j] = 0.5f - 0.01f * static_cast<float>(j);
  std::vector<float> expected(static_cast<size_t>(n), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) expected[j] += x[r * n + j];
  }
  for (int threads : {1, 2}) {
    NumThreadsGuard guard(threads);
    std::vector<float> sums(static_cast<size_t>(n), -1.0f), repeated(x.size(), -1.0f);
    sum_rows<float>(sums.data(), x.data(), rows, n);
    repeat_rows<float>(repeated.data(), row.data(), rows, n);
    EXPECT_EQ(sums, expected) << threads << " threads";
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(std::equal(row.begin(), row.end(), repeated.begin() + r * n)) << "row " << r << ", " << threads;
    }
  }
}

double cpu_seconds(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// A GEMM that runs on one thread (too small to split, or called inside a
// parallel region) runs on the calling thread alone: no other thread of
// the process works or spins meanwhile, whatever OpenMP's count (oneDNN
// would take all of them outside a parallel region if let).
TEST(GemmLibrary, ASingleThreadedGemmRunsOnTheCallingThreadAlone) {
  NumThreadsGuard two(2);
  const int64_t m = 60, n = 64, k = 64;  // below gemm.cpp's kParallelMacs: one call
  std::vector<float> a(static_cast<size_t>(m * k), 0.5f), b(static_cast<size_t>(k * n), 0.25f);
  std::vector<float> c(static_cast<size_t>(m * n));
  for (int i = 0; i < 20; ++i) gemm<float>(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  const double process = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID), thread = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
  for (int i = 0; i < 20000; ++i) gemm<float>(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  const double process_used = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - process;
  const double thread_used = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - thread;
  EXPECT_EQ(c[0], 0.5f * 0.25f * k);
  EXPECT_LT(process_used, 1.3 * thread_used + 0.02) << "other threads worked during one-thread GEMMs: process "
                                                    << process_used << " s, calling thread " << thread_used << " s; "
                                                    << gemm_summary();
  EXPECT_EQ(num_threads(), 2) << "the thread count was not put back";
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
