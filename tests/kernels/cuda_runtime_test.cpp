// Host-to-device copies through pinned staging (Note [Host-to-device
// copies] in kernels/cuda/runtime.cu), label cuda: the caller's buffer is
// free on return, a kernel queued after a copy reads the copied bytes, a
// copy queued after a kernel lands after it, the staging pool reused and
// refilled past its limit keeps every copy's bytes, and (on the emulated
// GPU, which runs queued work only when the host waits) a copy does not
// drain the compute stream.
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/runtime.h"
#include "kernels/cuda/unary.h"
#include "tests/support/gpu.h"
#if REMAT_CUDA_EMULATION
#include "kernels/cuda/emulation/control.h"
#endif

namespace remat::kernels {
namespace {

namespace cuda_k = kernels::cuda;

using test::stream;

// n floats on GPU 0, freed at scope exit; nothing copied in.
struct DeviceFloats {
  explicit DeviceFloats(size_t n) : n(n), ptr(static_cast<float*>(cuda_k::device_malloc(std::max<size_t>(n, 1) * 4, 0))) {}
  ~DeviceFloats() { cuda_k::device_free(ptr, 0); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  std::vector<float> read() const {
    std::vector<float> out(n);
    cuda_k::copy_device_to_host(out.data(), ptr, n * 4, stream());
    return out;
  }
  size_t n;
  float* ptr;
};

TEST(CudaRuntime, KernelsQueuedAfterCopiesFromOneReusedHostBufferReadEachCopysBytes) {
  REMAT_SKIP_WITHOUT_GPU("CUDA copies");
  constexpr size_t kN = 10007;
  constexpr int kCopies = 12;
  std::vector<float> host(kN);
  std::vector<std::unique_ptr<DeviceFloats>> inputs, outputs;
  for (int k = 0; k < kCopies; ++k) {
    for (size_t i = 0; i < kN; ++i) host[i] = static_cast<float>(k * 100000 + static_cast<int>(i));
    inputs.push_back(std::make_unique<DeviceFloats>(kN));
    outputs.push_back(std::make_unique<DeviceFloats>(kN));
    cuda_k::copy_host_to_device(inputs.back()->ptr, host.data(), kN * 4, stream());
    cuda_k::scale<float>(outputs.back()->ptr, inputs.back()->ptr, 2.0f, static_cast<int64_t>(kN), stream());
    std::fill(host.begin(), host.end(), -1.0f);  // the caller's buffer is free on return
  }
  for (int k = 0; k < kCopies; ++k) {
    const std::vector<float> got = outputs[static_cast<size_t>(k)]->read();
    for (size_t i = 0; i < kN; ++i) {
      ASSERT_EQ(got[i], 2.0f * static_cast<float>(k * 100000 + static_cast<int>(i))) << "copy " << k << " at " << i;
    }
  }
}

TEST(CudaRuntime, ACopyQueuedAfterAKernelLandsAfterIt) {
  REMAT_SKIP_WITHOUT_GPU("CUDA copies");
  constexpr size_t kN = 70001;
  DeviceFloats buffer(kN);
  const std::vector<float> twos(kN, 2.0f);
  cuda_k::fill<float>(buffer.ptr, 1.0f, static_cast<int64_t>(kN), stream());
  cuda_k::copy_host_to_device(buffer.ptr, twos.data(), kN * 4, stream());
  EXPECT_EQ(buffer.read(), twos);
}

// Copies of 48 MiB (64 MiB staging buffers: four fill the 256 MiB pool), six
// of them with nothing waited for between: the pool waits for its copies
// and makes room, and every copy keeps its own bytes.
TEST(CudaRuntime, CopiesPastTheStagingLimitKeepTheirBytes) {
  REMAT_SKIP_WITHOUT_GPU("CUDA copies");
  constexpr size_t kN = size_t{12} << 20;  // floats: 48 MiB
  constexpr int kCopies = 6;
  std::vector<float> host(kN);
  std::vector<std::unique_ptr<DeviceFloats>> buffers;
  for (int k = 0; k < kCopies; ++k) {
    for (size_t i = 0; i < kN; i += 4099) host[i] = static_cast<float>(k + 1);
    buffers.push_back(std::make_unique<DeviceFloats>(kN));
    cuda_k::copy_host_to_device(buffers.back()->ptr, host.data(), kN * 4, stream());
  }
  for (int k = 0; k < kCopies; ++k) {
    const std::vector<float> got = buffers[static_cast<size_t>(k)]->read();
    for (size_t i = 0; i < kN; i += 4099) ASSERT_EQ(got[i], static_cast<float>(k + 1)) << "copy " << k << " at " << i;
  }
}

#if REMAT_CUDA_EMULATION
// The emulated GPU runs a stream's work only when the host waits for it, so
// the grids it has run say whether a copy waited for the compute stream.
TEST(CudaRuntime, AHostToDeviceCopyDoesNotWaitForQueuedKernels) {
  REMAT_SKIP_WITHOUT_GPU("CUDA copies");
  constexpr size_t kN = 5000;
  DeviceFloats a(kN), b(kN);
  const std::vector<float> ones(kN, 1.0f);
  cuda_k::copy_host_to_device(a.ptr, ones.data(), kN * 4, stream());
  cuda_k::synchronize(stream());
  const uint64_t before = remat_emulation::counters().grids;
  cuda_k::scale<float>(b.ptr, a.ptr, 3.0f, static_cast<int64_t>(kN), stream());  // queued, not run
  for (int k = 0; k < 4; ++k) cuda_k::copy_host_to_device(a.ptr, ones.data(), kN * 4, stream());
  EXPECT_EQ(remat_emulation::counters().grids, before) << "a host-to-device copy ran the queued kernel (it waited)";
  EXPECT_EQ(b.read(), std::vector<float>(kN, 3.0f));  // the copy to the host waits, as it must
  EXPECT_EQ(remat_emulation::counters().grids, before + 1);
}
#endif

}  // namespace
}  // namespace remat::kernels

#else

TEST(CudaRuntime, NeedACudaBuild) { GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): CUDA runtime not built"; }

#endif
