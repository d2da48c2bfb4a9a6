// Tensors on a GPU (label cuda; skipped, with a message, where no GPU is
// present): storage from the GPU's caching allocator with the CPU's
// accounting, copies both ways with to(), item() and to_vector() through
// the host; without CUDA in the build, cuda:0 is an error that says so.
#include <gtest/gtest.h>

#include "engine/allocator.h"
#include "engine/factory.h"
#include "tests/support/errors.h"

#if REMAT_HAVE_CUDA
#include "tests/support/gpu.h"
#endif

namespace remat {
namespace {

#if REMAT_HAVE_CUDA

TEST(CudaTensor, CopiesToTheGpuAndBackWithTheAllocatorsAccounting) {
  REMAT_SKIP_WITHOUT_GPU("tensors on cuda:0");
  Allocator& gpu = allocator_for(Device::cuda(0));
  const int64_t before = gpu.stats().live_of(MemoryCategory::Activation);
  const Tensor host = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  {
    const Tensor device = to(host, Device::cuda(0));
    EXPECT_EQ(device.device(), Device::cuda(0));
    EXPECT_EQ(gpu.stats().live_of(MemoryCategory::Activation) - before, 24);
    EXPECT_TRUE(testing::contains(device.str(), "cuda:0")) << device.str();
    EXPECT_EQ(device.to_vector<float>(), host.to_vector<float>());
    EXPECT_EQ(to(device, Device::cpu()).to_vector<float>(), host.to_vector<float>());
    EXPECT_EQ(to(host, Device::cuda(0)).to_vector<float>(), host.to_vector<float>());
    const Tensor one = to(from_vector(std::vector<double>{2.5}, {1}), Device::cuda(0));
    EXPECT_EQ(one.item<double>(), 2.5);
  }
  EXPECT_EQ(gpu.stats().live_of(MemoryCategory::Activation), before);
  EXPECT_GT(gpu.stats().cached, 0);  // the blocks wait for the next step
}

// Where the build has CUDA and the machine no GPU (the CI machine), asking
// for cuda:0 is an error that says so, not a crash.
TEST(CudaTensor, WithoutAGpuAskingForOneIsAnErrorThatSaysSo) {
  if (kernels::cuda::device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  const std::string message = testing::error_of([] { (void)zeros({2}, DType::Float32, Device::cuda(0)); });
  EXPECT_TRUE(testing::contains(message, "no GPU cuda:0 here (this process sees 0)")) << message;
}

TEST(CudaTensor, AGpuThisProcessDoesNotSeeIsAnError) {
  REMAT_SKIP_WITHOUT_GPU("tensors on cuda:0");
  const std::string message = testing::error_of([] { (void)allocator_for(Device::cuda(4096)); });
  EXPECT_TRUE(testing::contains(message, "no GPU cuda:4096")) << message;
}

#else

TEST(CudaTensor, ABuildWithoutCudaSaysSo) {
  const std::string message = testing::error_of([] { (void)zeros({2}, DType::Float32, Device::cuda(0)); });
  EXPECT_TRUE(testing::contains(message, "configured without CUDA")) << message;
}

#endif

}  // namespace
}  // namespace remat
