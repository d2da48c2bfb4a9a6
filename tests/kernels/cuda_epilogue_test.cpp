// cuBLASLt's epilogues (kernels/cuda/gemm.h, Note [Fused epilogues]), label
// cuda: gemm_bias and gemm_bias_grad against gemm, repeat_rows and sums on
// the host, for every transpose, odd and multi-block sizes, float and
// double (relative to the largest value); the GELU epilogues against
// kernels/math.h's tanh form (cuBLASLt's); and, on the emulated GPU, the
// argument errors cuBLASLt reports.
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/runtime.h"
#include "kernels/unary_math.h"
#include "tests/support/gpu.h"

namespace remat::kernels {
namespace {

namespace cuda_k = kernels::cuda;
using test::DeviceBuffer;
using test::random_values;

using test::stream;

// max |x - y| over max |y|.
using test::relative_gap;

template <class T>
double tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-12;
}

// A (m, k) stored as itself or, with trans, as its (k, m) transpose; op(A) = A either way.
template <class T>
struct Operand {
  std::vector<T> stored;
  int64_t ld;
  bool trans;
  T at(int64_t i, int64_t j) const { return trans ? stored[static_cast<size_t>(j * ld + i)] : stored[static_cast<size_t>(i * ld + j)]; }
};

template <class T>
Operand<T> operand(int64_t rows, int64_t cols, bool trans, uint64_t seed) {
  return {random_values<T>(static_cast<size_t>(rows * cols), -1, 1, seed), trans ? rows : cols, trans};
}

// op(A) op(B) in double on the host.
template <class T>
std::vector<T> host_product(const Operand<T>& a, const Operand<T>& b, int64_t m, int64_t n, int64_t k) {
  std::vector<T> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t kk = 0; kk < k; ++kk) acc += static_cast<double>(a.at(i, kk)) * static_cast<double>(b.at(kk, j));
      c[static_cast<size_t>(i * n + j)] = static_cast<T>(acc);
    }
  }
  return c;
}

struct Sizes {
  int64_t m, n, k;
};
// Odd sizes, one that fits a block and some that need many (m n > 1024 threads).
const Sizes kSizes[] = {{1, 1, 1}, {7, 5, 3}, {37, 53, 29}, {130, 67, 41}, {64, 300, 16}};

template <class T>
void check_gemm_bias() {
  for (const Sizes s : kSizes) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        const Operand<T> a = operand<T>(s.m, s.k, ta, 1), b = operand<T>(s.k, s.n, tb, 2);
        const std::vector<T> bias = random_values<T>(static_cast<size_t>(s.n), -1, 1, 3);
        DeviceBuffer<T> da(a.stored), db(b.stored), dbias(bias), dc(static_cast<size_t>(s.m * s.n));
        cuda_k::gemm_bias<T>(ta, tb, s.m, s.n, s.k, da.ptr, a.ld, db.ptr, b.ld, dbias.ptr, dc.ptr, s.n, stream());
        std::vector<T> want = host_product(a, b, s.m, s.n, s.k);
        for (size_t e = 0; e < want.size(); ++e) want[e] += bias[e % static_cast<size_t>(s.n)];
        EXPECT_LT(relative_gap(dc.read(), want), tolerance<T>()) << s.m << "x" << s.n << "x" << s.k << " " << ta << tb;
      }
    }
  }
}

TEST(CudaEpilogues, GemmBiasAddsTheBiasToEveryRow) {
  REMAT_SKIP_WITHOUT_GPU("cuBLASLt epilogues");
  check_gemm_bias<float>();
  check_gemm_bias<double>();
}

template <class T>
void check_gemm_bias_grad() {
  for (const Sizes s : kSizes) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        for (const cuda_k::BiasGradOf of : {cuda_k::BiasGradOf::A, cuda_k::BiasGradOf::B}) {
          const Operand<T> a = operand<T>(s.m, s.k, ta, 4), b = operand<T>(s.k, s.n, tb, 5);
          const bool of_a = of == cuda_k::BiasGradOf::A;
          DeviceBuffer<T> da(a.stored), db(b.stored), dc(static_cast<size_t>(s.m * s.n));
          DeviceBuffer<T> dbias(static_cast<size_t>(of_a ? s.m : s.n));
          cuda_k::gemm_bias_grad<T>(ta, tb, s.m, s.n, s.k, da.ptr, a.ld, db.ptr, b.ld, dc.ptr, s.n, dbias.ptr, of,
                                    stream());
          std::vector<T> sums(dbias.n);
          for (size_t i = 0; i < sums.size(); ++i) {
            double acc = 0;
            for (int64_t kk = 0; kk < s.k; ++kk) {
              acc += of_a ? a.at(static_cast<int64_t>(i), kk) : b.at(kk, static_cast<int64_t>(i));
            }
            sums[i] = static_cast<T>(acc);
          }
          EXPECT_LT(relative_gap(dc.read(), host_product(a, b, s.m, s.n, s.k)), tolerance<T>());
          EXPECT_LT(relative_gap(dbias.read(), sums), tolerance<T>())
              << s.m << "x" << s.n << "x" << s.k << " " << ta << tb << " of " << (of_a ? "A" : "B");
        }
      }
    }
  }
}

TEST(CudaEpilogues, GemmBiasGradSumsTheNamedOperandOverK) {
  REMAT_SKIP_WITHOUT_GPU("cuBLASLt epilogues");
  check_gemm_bias_grad<float>();
  check_gemm_bias_grad<double>();
}

TEST(CudaEpilogues, TheFlagIsOffUntilSet) {
  EXPECT_FALSE(cuda_k::fused_epilogues());
  cuda_k::set_fused_epilogues(true);
  EXPECT_TRUE(cuda_k::fused_epilogues());
  cuda_k::set_fused_epilogues(false);
  EXPECT_FALSE(cuda_k::fused_epilogues());
}

// --- cuBLASLt called directly: the GELU epilogues and argument errors ------

// Column-major D (m x n) = A (m x k) B (k x n) with `epilogue`, bias (m) and
// aux (m x n, ld aux_ld) on GPU 0; the status of the call.
struct LtRun {
  int m, n, k;
  cublasLtEpilogue_t epilogue;
  int64_t aux_ld;
  bool with_bias = true;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};

cublasStatus_t run_lt(const LtRun& r, const DeviceBuffer<float>& a, const DeviceBuffer<float>& b,
                      DeviceBuffer<float>& d, DeviceBuffer<float>& bias, DeviceBuffer<float>& aux) {
  cublasLtHandle_t handle = nullptr;
  EXPECT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  EXPECT_EQ(cublasLtMatmulDescCreate(&op, r.compute, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const uint32_t epilogue = r.epilogue;
  const void* bias_ptr = r.with_bias ? bias.ptr : nullptr;
  const void* aux_ptr = aux.ptr;
  const int64_t aux_ld = r.aux_ld;
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr));
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux_ptr, sizeof(aux_ptr));
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld));
  cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, static_cast<uint64_t>(r.m), static_cast<uint64_t>(r.k), r.m);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, static_cast<uint64_t>(r.k), static_cast<uint64_t>(r.n), r.k);
  cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, static_cast<uint64_t>(r.m), static_cast<uint64_t>(r.n), r.m);
  const float one = 1, zero = 0;
  const cublasStatus_t status = cublasLtMatmul(handle, op, &one, a.ptr, la, b.ptr, lb, &zero, d.ptr, ld, d.ptr, ld,
                                               nullptr, nullptr, 0, static_cast<cudaStream_t>(stream().handle));
  cuda_k::synchronize(stream());
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(handle);
  return status;
}

TEST(CudaEpilogues, GeluAuxBiasKeepsThePreActivationAndDgeluScalesByTheTanhFormsDerivative) {
  REMAT_SKIP_WITHOUT_GPU("cuBLASLt epilogues");
  const int m = 24, n = 37, k = 19;  // m: the aux ld, a multiple of 8
  DeviceBuffer<float> a(random_values<float>(m * k, -1, 1, 6)), b(random_values<float>(k * n, -1, 1, 7));
  DeviceBuffer<float> bias(random_values<float>(m, -1, 1, 8)), d(static_cast<size_t>(m * n));
  DeviceBuffer<float> aux(static_cast<size_t>(m * n));
  ASSERT_EQ(run_lt({m, n, k, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, m}, a, b, d, bias, aux), CUBLAS_STATUS_SUCCESS);
  std::vector<float> pre(static_cast<size_t>(m * n)), act(pre.size());
  const std::vector<float> av = a.read(), bv = b.read(), biasv = bias.read();
  const auto exp = [](double x) { return std::exp(x); };
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double acc = biasv[static_cast<size_t>(i)];
      for (int kk = 0; kk < k; ++kk) acc += double(av[static_cast<size_t>(i + kk * m)]) * bv[static_cast<size_t>(kk + j * k)];
      pre[static_cast<size_t>(i + j * m)] = static_cast<float>(acc);
      act[static_cast<size_t>(i + j * m)] = static_cast<float>(gelu_of<double>(acc, exp));
    }
  }
  EXPECT_LT(relative_gap(aux.read(), pre), 1e-5);
  EXPECT_LT(relative_gap(d.read(), act), 1e-4);  // a GPU's tanh/exp: about 1e-6 relative; the erf form is 1e-3 away
  // DGELU: D = (A B) gelu'(aux), the aux written above.
  DeviceBuffer<float> dd(static_cast<size_t>(m * n));
  ASSERT_EQ(run_lt({m, n, k, CUBLASLT_EPILOGUE_DGELU_BGRAD, m}, a, b, dd, bias, aux), CUBLAS_STATUS_SUCCESS);
  std::vector<float> want(pre.size()), row_sums(static_cast<size_t>(m));
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      const size_t e = static_cast<size_t>(i + j * m);
      want[e] = static_cast<float>(gelu_grad_of<double>(double(pre[e]) - biasv[static_cast<size_t>(i)], double(pre[e]), exp));
      row_sums[static_cast<size_t>(i)] += want[e];
    }
  }
  EXPECT_LT(relative_gap(dd.read(), want), 1e-4);
  EXPECT_LT(relative_gap(bias.read(), row_sums), 1e-4);  // DGELU_BGRAD: D's row sums
}

#if REMAT_CUDA_EMULATION
TEST(CudaEpilogues, TheEmulatedCublasLtReportsBadArgumentsAsCublasLtDoes) {
  const int m = 12, n = 5, k = 3;
  DeviceBuffer<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), d(static_cast<size_t>(m * n));
  DeviceBuffer<float> bias(static_cast<size_t>(m)), aux(static_cast<size_t>(16 * n));
  // The aux ld must be a multiple of 8 and at least D's rows.
  EXPECT_EQ(run_lt({m, n, k, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 12}, a, b, d, bias, aux), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(run_lt({m, n, k, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 8}, a, b, d, bias, aux), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_NE(std::string(cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE)).find("aux ld 8"), std::string::npos);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // a status, not a CUDA error that would spoil the next launch
  EXPECT_EQ(run_lt({m, n, k, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 16}, a, b, d, bias, aux), CUBLAS_STATUS_SUCCESS);
  // A bias epilogue without a bias pointer; a compute type that does not fit float data.
  EXPECT_EQ(run_lt({m, n, k, CUBLASLT_EPILOGUE_BIAS, 0, false}, a, b, d, bias, aux), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(run_lt({m, n, k, CUBLASLT_EPILOGUE_BGRADA, 0, false}, a, b, d, bias, aux), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(run_lt({m, n, k, CUBLASLT_EPILOGUE_DEFAULT, 0, true, CUBLAS_COMPUTE_64F}, a, b, d, bias, aux),
            CUBLAS_STATUS_NOT_SUPPORTED);
  // The ReLU epilogues exist in cuBLASLt but not in the emulation; 3 is no epilogue.
  EXPECT_EQ(run_lt({m, n, k, CUBLASLT_EPILOGUE_RELU, 0}, a, b, d, bias, aux), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(run_lt({m, n, k, static_cast<cublasLtEpilogue_t>(3), 0}, a, b, d, bias, aux), CUBLAS_STATUS_INVALID_VALUE);
  // An attribute's size must be its type's.
  cublasLtMatmulDesc_t op = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const int64_t wide = CUBLASLT_EPILOGUE_BIAS;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &wide, sizeof(wide)),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, nullptr, 4), CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulDescDestroy(op);
}
#endif

}  // namespace
}  // namespace remat::kernels

#else

TEST(CudaEpilogues, NeedACudaBuild) { GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): epilogues not built"; }

#endif
