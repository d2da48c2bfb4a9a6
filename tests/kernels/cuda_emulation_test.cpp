// The emulated GPU itself (REMAT_CUDA_EMULATION builds; label cuda): that
// it runs kernels as a GPU would and catches what a GPU would not say
// plainly (docs/gpu/emulation.md). The kernels here are written for the
// test, in plain C++ as the emulation compiles every .cu file.
#include <gtest/gtest.h>

#if REMAT_CUDA_EMULATION

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/cuda/emulation/control.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/softmax.h"

namespace remat::kernels::cuda {
namespace {

using remat_emulation::ThreadOrder;

// Sums x[0, n) into out[block] per block: a shared-memory tree with or
// without the barriers it needs.
template <bool kBarriers>
__global__ void block_sums(float* out, const float* x, int n) {
  __shared__ float share[256];
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  share[threadIdx.x] = i < n ? x[i] : 0.0f;
  if (kBarriers) __syncthreads();
  for (int half = 128; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) share[threadIdx.x] += share[threadIdx.x + half];
    if (kBarriers) __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = share[0];
}

// Sums each warp's 32 values with a butterfly of shuffles; lane 0 writes.
__global__ void warp_sums(float* out, const float* x) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  float v = x[i];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const unsigned positive = __ballot_sync(0xffffffffu, x[i] > 0);
  if (threadIdx.x % 32 == 0) {
    out[2 * (i / 32)] = v;
    out[2 * (i / 32) + 1] = static_cast<float>(__popc(positive));
  }
}

// Lanes 16..31 return before the others shuffle over the whole warp.
__global__ void partial_warp(float* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1.0f, 1);
}

// Lane 0 waits at a barrier while lanes 1..31 wait for lane 0 in a shuffle.
__global__ void crossed_waits(float* out) {
  if (threadIdx.x == 0) {
    __syncthreads();
  } else {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
  }
}

__global__ void uses_dynamic_shared(float* out) {
  float* share = dynamic_shared<float>();
  share[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = share[blockDim.x - 1 - threadIdx.x];
}

__global__ void nothing() {}

Stream stream0() { return compute_stream(0); }

struct Buffer {
  explicit Buffer(size_t n) : n(n) { ptr = static_cast<float*>(device_malloc(std::max<size_t>(n, 1) * 4, 0)); }
  explicit Buffer(const std::vector<float>& values) : Buffer(values.size()) {
    copy_host_to_device(ptr, values.data(), n * 4, stream0());
  }
  ~Buffer() { device_free(ptr, 0); }
  std::vector<float> read() const {
    std::vector<float> out(n);
    copy_device_to_host(out.data(), ptr, n * 4, stream0());
    return out;
  }
  size_t n;
  float* ptr;
};

// The message of the error a wait on the stream reports, or "".
std::string error_at_wait() {
  try {
    synchronize(stream0());
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Each test may set the thread order; the order before it comes back after
// (REMAT_EMULATION_ORDER's, for the tests that follow).
class CudaEmulation : public ::testing::Test {
 protected:
  void TearDown() override { remat_emulation::set_thread_order(before_); }
  ThreadOrder before_ = remat_emulation::thread_order();
};

std::vector<float> ramp(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 17) - 8.0f;
  return x;
}

std::vector<float> expected_block_sums(const std::vector<float>& x, size_t blocks) {
  std::vector<float> sums(blocks, 0.0f);
  for (size_t i = 0; i < x.size(); ++i) sums[i / 256] += x[i];
  return sums;
}

TEST_F(CudaEmulation, BarriersMakeABlockReductionRightInEveryOrder) {
  const std::vector<float> x = ramp(1000);
  const Buffer in(x), out(4);
  for (ThreadOrder order : {ThreadOrder::InOrder, ThreadOrder::Shuffled}) {
    remat_emulation::set_thread_order(order, 7);
    launch("block_sums", block_sums<true>, {4, 256}, stream0(), out.ptr, in.ptr, 1000);
    EXPECT_EQ(out.read(), expected_block_sums(x, 4)) << (order == ThreadOrder::Shuffled ? "shuffled" : "in order");
  }
}

TEST_F(CudaEmulation, AMissingBarrierGivesAWrongSum) {
  const std::vector<float> x = ramp(1000);
  const Buffer in(x), out(4);
  remat_emulation::set_thread_order(ThreadOrder::Shuffled, 7);
  launch("block_sums", block_sums<false>, {4, 256}, stream0(), out.ptr, in.ptr, 1000);
  EXPECT_NE(out.read(), expected_block_sums(x, 4));
}

TEST_F(CudaEmulation, WarpShufflesAndBallotsCombineTheLanes) {
  std::vector<float> x = ramp(128);
  const Buffer in(x), out(8);
  for (ThreadOrder order : {ThreadOrder::InOrder, ThreadOrder::Shuffled}) {
    remat_emulation::set_thread_order(order, 3);
    launch("warp_sums", warp_sums, {2, 64}, stream0(), out.ptr, in.ptr);
    const std::vector<float> got = out.read();
    for (int w = 0; w < 4; ++w) {
      float sum = 0, positive = 0;
      for (int l = 0; l < 32; ++l) {
        sum += x[static_cast<size_t>(w * 32 + l)];
        positive += x[static_cast<size_t>(w * 32 + l)] > 0 ? 1.0f : 0.0f;
      }
      EXPECT_FLOAT_EQ(got[static_cast<size_t>(2 * w)], sum) << "warp " << w;
      EXPECT_EQ(got[static_cast<size_t>(2 * w + 1)], positive) << "warp " << w;
    }
  }
}

TEST_F(CudaEmulation, AShuffleOverAPartialWarpIsAnErrorNamingTheKernel) {
  const Buffer out(32);
  launch("partial_warp", partial_warp, {1, 32}, stream0(), out.ptr);
  const std::string error = error_at_wait();
  EXPECT_NE(error.find("kernel 'partial_warp'"), std::string::npos) << error;
  EXPECT_NE(error.find("partial warp"), std::string::npos) << error;
  // The stream goes on with later work.
  launch("nothing", nothing, {1, 1}, stream0());
  EXPECT_EQ(error_at_wait(), "");
}

TEST_F(CudaEmulation, ADeadlockIsAnErrorSayingWhereThreadsWait) {
  const Buffer out(32);
  launch("crossed_waits", crossed_waits, {1, 32}, stream0(), out.ptr);
  const std::string error = error_at_wait();
  EXPECT_NE(error.find("kernel 'crossed_waits'"), std::string::npos) << error;
  EXPECT_NE(error.find("deadlock"), std::string::npos) << error;
  EXPECT_NE(error.find("__syncthreads"), std::string::npos) << error;
  EXPECT_NE(error.find("__shfl_xor_sync"), std::string::npos) << error;
}

TEST_F(CudaEmulation, LaunchShapesAGpuRefusesThrowAtTheLaunch) {
  const auto message = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message([] { launch("nothing", nothing, {dim3(1, 70000), 32}, stream0()); }).find("65535"),
            std::string::npos);
  EXPECT_NE(message([] { launch("nothing", nothing, {1, 2048}, stream0()); }).find("more than 1024"),
            std::string::npos);
  const Buffer out(64);
  const std::string shared = message([&] { launch("dyn", uses_dynamic_shared, {1, 64, 64 << 10}, stream0(), out.ptr); });
  EXPECT_NE(shared.find("limit of 49152"), std::string::npos) << shared;
  EXPECT_NE(shared.find("'dyn'"), std::string::npos) << shared;
  ASSERT_EQ(cudaFuncSetAttribute(uses_dynamic_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10),
            cudaSuccess);
  launch("dyn", uses_dynamic_shared, {1, 64, 64 << 10}, stream0(), out.ptr);
  const std::vector<float> got = out.read();
  for (int i = 0; i < 64; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], 63 - i);
}

TEST_F(CudaEmulation, HostCodeThatReadsDeviceMemoryStopsWithAMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Buffer buffer(std::vector<float>{1, 2, 3});
  EXPECT_DEATH({ volatile float v = buffer.ptr[1]; (void)v; }, "host code touched device memory");
}

#if defined(__SANITIZE_ADDRESS__)
#define REMAT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REMAT_TEST_ASAN 1
#endif
#endif
#if REMAT_TEST_ASAN
// Reads one element past the end of x.
__global__ void read_past_end(float* out, const float* x, int n) {
  if (threadIdx.x == 0) out[0] = x[n];
}

TEST_F(CudaEmulation, AKernelReadingPastItsBufferIsCaughtByAddressSanitizer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Buffer in(std::vector<float>(10, 1.0f)), out(1);
  EXPECT_DEATH(
      {
        launch("read_past_end", read_past_end, {1, 32}, stream0(), out.ptr, in.ptr, 10);
        synchronize(stream0());
      },
      "use-after-poison");
}
#endif

TEST_F(CudaEmulation, WorkRunsInStreamOrderAndEventsWaitAcrossStreams) {
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  const std::vector<float> x = ramp(256);
  const Buffer in(x), out(1), copy(1);
  // Stream 0 writes out; the other stream copies it after an event.
  launch("block_sums", block_sums<true>, {1, 256}, stream0(), out.ptr, in.ptr, 256);
  cudaEvent_t written = nullptr;
  ASSERT_EQ(cudaEventCreate(&written), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(written, static_cast<cudaStream_t>(stream0().handle)), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(other, written, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(copy.ptr, out.ptr, 4, cudaMemcpyDeviceToDevice, other), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(other), cudaSuccess);  // runs stream 0 up to the event first
  EXPECT_EQ(copy.read(), expected_block_sums(x, 1));
  cudaEvent_t later = nullptr;
  ASSERT_EQ(cudaEventCreate(&later), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(later, static_cast<cudaStream_t>(stream0().handle)), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(later), cudaSuccess);
  float ms = -1;
  ASSERT_EQ(cudaEventElapsedTime(&ms, written, later), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  cudaEventDestroy(written);
  cudaEventDestroy(later);
  cudaStreamDestroy(other);
}

TEST_F(CudaEmulation, CopiesOutsideAnAllocationAreRefused) {
  const Buffer buffer(4);
  std::vector<float> host(8);
  const cudaError_t status = cudaMemcpy(host.data(), buffer.ptr, 8 * 4, cudaMemcpyDeviceToHost);
  EXPECT_EQ(status, cudaErrorInvalidValue);
  EXPECT_NE(std::string(cudaGetErrorString(status)).find("allocation of 16 bytes"), std::string::npos)
      << cudaGetErrorString(status);
  EXPECT_EQ(cudaMemcpy(host.data(), host.data() + 4, 16, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  (void)cudaGetLastError();
}

// cuBLAS's column-major rules: C (m x n, ldc) = alpha op(A) op(B) + beta C.
TEST_F(CudaEmulation, CublasGemmFollowsColumnMajorLeadingDimensionsAndTransposes) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetStream(handle, static_cast<cudaStream_t>(stream0().handle)), CUBLAS_STATUS_SUCCESS);
  const int m = 3, n = 2, k = 4, ld_pad = 2;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
      const int lda = a_rows + ld_pad, ldb = b_rows + ld_pad, ldc = m + ld_pad;
      std::vector<float> a(static_cast<size_t>(lda * a_cols)), b(static_cast<size_t>(ldb * b_cols));
      std::vector<float> c(static_cast<size_t>(ldc * n), std::numeric_limits<float>::quiet_NaN());
      for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 5) - 2;
      for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 3) + 1;
      const Buffer da(a), db(b), dc(c);
      const float alpha = 2, beta = 0;  // beta 0: C's NaN are never read
      ASSERT_EQ(cublasSgemm(handle, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha,
                            da.ptr, lda, db.ptr, ldb, &beta, dc.ptr, ldc),
                CUBLAS_STATUS_SUCCESS);
      const std::vector<float> got = dc.read();
      for (int j = 0; j < n; ++j) {
        for (int i = 0; i < m; ++i) {
          float want = 0;
          for (int p = 0; p < k; ++p) {
            const float av = ta ? a[static_cast<size_t>(i * lda + p)] : a[static_cast<size_t>(p * lda + i)];
            const float bv = tb ? b[static_cast<size_t>(p * ldb + j)] : b[static_cast<size_t>(j * ldb + p)];
            want += av * bv;
          }
          EXPECT_FLOAT_EQ(got[static_cast<size_t>(j * ldc + i)], alpha * want) << ta << tb << " at " << i << "," << j;
        }
        for (int i = m; i < ldc; ++i) EXPECT_TRUE(std::isnan(got[static_cast<size_t>(j * ldc + i)]));  // padding kept
      }
    }
  }
  const Buffer small(16);
  const float one = 1;
  EXPECT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 4, 2, 2, &one, small.ptr, 3, small.ptr, 2, &one, small.ptr, 4),
            CUBLAS_STATUS_INVALID_VALUE);  // lda 3 < m 4
  (void)cudaGetLastError();
  cublasDestroy(handle);
}

// Run with REMAT_EMULATED_GPUS=2 (ctest kernels.cuda.emulated_two_devices).
TEST(CudaEmulationTwoDevices, EveryLauncherSetsItsStreamsDeviceWhateverIsCurrent) {
  if (device_count() < 2) GTEST_SKIP() << "needs two devices: REMAT_EMULATED_GPUS=2";
  const Stream stream = compute_stream(0);
  // A launcher that leaves the device to whoever called last is an error
  // on a GPU, and here, when another device is current.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  const cudaError_t raw_launch =
      remat_emulation::launch({"nothing", nullptr, dim3(1), dim3(1), 0}, raw(stream), [] { nothing(); });
  EXPECT_EQ(raw_launch, cudaErrorInvalidResourceHandle);
  EXPECT_NE(std::string(cudaGetErrorString(raw_launch)).find("stream of device 0 while device 1 is current"),
            std::string::npos);
  (void)cudaGetLastError();
  // launch() sets it: cross-entropy (a launch, then copies) with device 1 current.
  const std::vector<float> logits = ramp(12);  // 3 rows of 4 classes
  const std::vector<int64_t> targets = {1, 3, 0};
  float* d_logits = static_cast<float*>(device_malloc(12 * 4, 0));
  float* d_stats = static_cast<float*>(device_malloc(6 * 4, 0));
  auto* d_targets = static_cast<int64_t*>(device_malloc(3 * 8, 0));
  copy_host_to_device(d_logits, logits.data(), 12 * 4, stream);
  copy_host_to_device(d_targets, targets.data(), 3 * 8, stream);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  double loss = 0;
  int64_t count = 0, bad_row = -1;
  EXPECT_TRUE(cross_entropy_forward<float>(&loss, &count, d_stats, &bad_row, d_logits, d_targets, 3, 4, -100, stream));
  EXPECT_EQ(count, 3);
  EXPECT_GT(loss, 0.0);
  // Backward is one launch, into the logits: it too sets the device itself.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cross_entropy_backward<float>(d_logits, d_logits, d_stats, d_targets, 3, 4, -100, 1.0f / 3, stream);
  std::vector<float> dlogits(12);
  copy_device_to_host(dlogits.data(), d_logits, 12 * 4, stream);
  EXPECT_LT(dlogits[1], 0.0f);  // row 0's target
  EXPECT_GT(dlogits[0], 0.0f);
  device_free(d_logits, 0);
  device_free(d_stats, 0);
  device_free(d_targets, 0);
}

}  // namespace
}  // namespace remat::kernels::cuda

#else
TEST(CudaEmulation, NeedsAnEmulationBuild) {
  GTEST_SKIP() << "not a REMAT_CUDA_EMULATION build: the emulated GPU's own tests are not built";
}
#endif
