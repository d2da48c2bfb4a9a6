// The BLAS loader (kernels/cpu/blas.h): which OpenBLAS core each CPU gets,
// that the loaded one uses all the CPU offers, and the thread count's range.
#include "kernels/cpu/blas.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"

namespace remat::kernels::cpu {
namespace {

TEST(Blas, CoreLevelsFollowTheirKernels) {
  EXPECT_EQ(openblas_core_level("SkylakeX"), IsaLevel::Avx512);
  EXPECT_EQ(openblas_core_level("COOPERLAKE"), IsaLevel::Avx512);  // case varies between versions
  EXPECT_EQ(openblas_core_level("Zen"), IsaLevel::Avx2);
  EXPECT_EQ(openblas_core_level("Haswell"), IsaLevel::Avx2);
  EXPECT_EQ(openblas_core_level("Sandybridge"), IsaLevel::Avx);
  EXPECT_EQ(openblas_core_level("Prescott"), IsaLevel::Baseline);
  EXPECT_EQ(openblas_core_level("SomethingNew"), IsaLevel::Baseline);
}

// The model-207 Xeon: OpenBLAS 0.3.21 detects Prescott on an AVX-512 CPU.
TEST(Blas, AMisdetectedCoreIsReplacedByTheOneTheFeaturesCallFor) {
  EXPECT_EQ(openblas_core_to_force(IsaLevel::Avx512, "Prescott"), "SkylakeX");
  EXPECT_EQ(openblas_core_to_force(IsaLevel::Avx512, "Zen"), "SkylakeX");  // Zen 4 under 0.3.21
  EXPECT_EQ(openblas_core_to_force(IsaLevel::Avx2, "Prescott"), "Haswell");
  EXPECT_EQ(openblas_core_to_force(IsaLevel::Avx, "Prescott"), "Sandybridge");
}

TEST(Blas, ACoreThatUsesEverythingIsKept) {
  EXPECT_EQ(openblas_core_to_force(IsaLevel::Avx2, "Zen"), std::nullopt);
  EXPECT_EQ(openblas_core_to_force(IsaLevel::Avx2, "Haswell"), std::nullopt);
  EXPECT_EQ(openblas_core_to_force(IsaLevel::Avx512, "Cooperlake"), std::nullopt);
  EXPECT_EQ(openblas_core_to_force(IsaLevel::Avx2, "SkylakeX"), std::nullopt);  // wider than the CPU: its choice
  EXPECT_EQ(openblas_core_to_force(IsaLevel::Baseline, "Prescott"), std::nullopt);
}

// On this machine: the loaded kernels use the widest instructions its CPU
// has (failed on the model-207 Xeon before the loader: Prescott on AVX-512).
TEST(Blas, TheLoadedCoreUsesEveryInstructionTheCpuOffers) {
  const BlasInfo info = blas_info();
  if (info.choice == "OPENBLAS_CORETYPE") GTEST_SKIP() << "the core was forced: " << blas_summary();
  EXPECT_GE(openblas_core_level(info.core), info.cpu_level) << blas_summary();
  EXPECT_NE(info.library.find("OpenBLAS"), std::string::npos) << info.library;
  EXPECT_GE(info.max_threads, 1);
}

TEST(Blas, GemmRunsThroughTheLoadedLibrary) {
  // (2, 3) x (3, 2), row-major
  const float a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, 11, 12};
  float c[4] = {};
  gemm<float>(false, false, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2);
  EXPECT_EQ(c[0], 58);
  EXPECT_EQ(c[1], 64);
  EXPECT_EQ(c[2], 139);
  EXPECT_EQ(c[3], 154);
}

TEST(Blas, ThreadCountsOutsideTheRangeAreErrors) {
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
  const int most = blas_info().max_threads;  // 0: the library does not say
  EXPECT_EQ(blas_info().threads, most > 0 ? std::min(2, most) : 2);
}

}  // namespace
}  // namespace remat::kernels::cpu
