// Tests of the NCCL backend (comm/nccl.h): allreduce, broadcast, allgather
// and the argument check, on device buffers, one GPU per rank.
//
//   mpirun -np 1 build/tests/test_comm --gtest_filter='Nccl*'    # one GPU
//   mpirun -np 2 build/tests/test_comm --gtest_filter='Nccl*'    # two GPUs: also the mismatch test
//
// Every test skips, with its reason, where no CUDA toolkit was found at build
// time, where no GPU is present, or outside mpirun.
#include <gtest/gtest.h>

#if !REMAT_HAVE_NCCL

TEST(NcclTest, NotBuilt) { GTEST_SKIP() << "NCCL backend not built (no CUDA toolkit)"; }

#else

#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/buckets.h"
#include "comm/mpi.h"
#include "comm/nccl.h"
#include "engine/factory.h"
#include "engine/tensor.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/runtime.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "optim/sgd.h"
#include "train/accelerator.h"

namespace remat::comm {
namespace {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(status)));
}

// `count` elements of T in GPU memory, freed however the test ends.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(int64_t count) : count_(count) {
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&data_), bytes() > 0 ? bytes() : 1), "cudaMalloc");
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(static_cast<int64_t>(host.size())) {
    check_cuda(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return data_; }
  std::vector<T> to_host() const {
    std::vector<T> host(static_cast<size_t>(count_));
    check_cuda(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU");
    return host;
  }

 private:
  size_t bytes() const { return static_cast<size_t>(count_) * sizeof(T); }

  T* data_ = nullptr;
  int64_t count_;
};

// The first index where `got` differs from `expected` by more than
// `tolerance` (relative), or -1: one failure line instead of a million.
template <class T>
int64_t first_mismatch(const std::vector<T>& got, const std::vector<T>& expected, double tolerance) {
  for (size_t i = 0; i < got.size(); ++i) {
    const double want = static_cast<double>(expected[i]);
    if (std::abs(static_cast<double>(got[i]) - want) > tolerance * std::max(1.0, std::abs(want))) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Nccl::device_count() == 0) GTEST_SKIP() << "no GPU: NCCL tests need one";
    if (!Mpi::launched_by_mpi()) {
      GTEST_SKIP() << "run under mpirun: mpirun -np <GPUs> test_comm --gtest_filter='Nccl*'";
    }
    bootstrap_ = std::make_unique<Mpi>(60);
    // NCCL refuses two ranks on one GPU (ctest's mpi label runs 2 and 4 ranks
    // on whatever the host has); every rank of a host skips alike.
    const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int ranks_here = local_size != nullptr ? std::atoi(local_size) : bootstrap_->world_size();
    if (ranks_here > Nccl::device_count()) {
      GTEST_SKIP() << ranks_here << " ranks on this host but " << Nccl::device_count()
                   << " GPU(s): NCCL needs one GPU per rank";
    }
    nccl_ = std::make_unique<Nccl>(*bootstrap_, -1, 60);
  }

  // Rank r holds (r + 1) + (i mod 7) at element i; small integers, so that the
  // sum is exact in float32 and the average within rounding.
  template <class T>
  void check_allreduce(DType dtype, ReduceOp op, int64_t count, double tolerance) {
    SCOPED_TRACE(fmt::format("{} {} of {} elements", dtype_name(dtype), reduce_op_name(op), count));
    const int n = nccl_->world_size();
    std::vector<T> mine(static_cast<size_t>(count));
    std::vector<T> expected(mine.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      mine[i] = static_cast<T>(nccl_->rank() + 1 + static_cast<int>(i % 7));
      const double sum = n * (n + 1) / 2.0 + n * static_cast<double>(i % 7);
      expected[i] = static_cast<T>(op == ReduceOp::Average ? sum / n : sum);
    }
    DeviceBuffer<T> buffer(mine);
    nccl_->allreduce(buffer.get(), count, dtype, op);
    const std::vector<T> got = buffer.to_host();
    const int64_t bad = first_mismatch(got, expected, tolerance);
    EXPECT_EQ(bad, -1) << "element " << bad << ": got " << (bad >= 0 ? got[static_cast<size_t>(bad)] : T{})
                       << ", expected " << (bad >= 0 ? expected[static_cast<size_t>(bad)] : T{});
  }

  std::unique_ptr<Mpi> bootstrap_;
  std::unique_ptr<Nccl> nccl_;  // declared last: destroyed before its bootstrap
};

constexpr int64_t kSizes[] = {1, 1000, int64_t{1} << 20};

TEST_F(NcclTest, AllreduceSumFloat32) {
  for (int64_t count : kSizes) check_allreduce<float>(DType::Float32, ReduceOp::Sum, count, 0);
}

TEST_F(NcclTest, AllreduceAverageFloat32) {
  for (int64_t count : kSizes) check_allreduce<float>(DType::Float32, ReduceOp::Average, count, 1e-6);
}

TEST_F(NcclTest, AllreduceSumFloat64) {
  for (int64_t count : kSizes) check_allreduce<double>(DType::Float64, ReduceOp::Sum, count, 0);
}

TEST_F(NcclTest, AllreduceAverageFloat64) {
  for (int64_t count : kSizes) check_allreduce<double>(DType::Float64, ReduceOp::Average, count, 1e-14);
}

TEST_F(NcclTest, AllreduceCountsStats) {
  DeviceBuffer<float> buffer(std::vector<float>(256, 1.0f));
  nccl_->allreduce(buffer.get(), 256, DType::Float32, ReduceOp::Sum);
  EXPECT_EQ(nccl_->stats().allreduce_calls, 1);
  EXPECT_EQ(nccl_->stats().allreduce_bytes, 256 * 4);
}

TEST_F(NcclTest, BroadcastFromRoot0) {
  for (int64_t count : {int64_t{1000}, int64_t{1} << 20}) {
    SCOPED_TRACE(fmt::format("{} elements", count));
    std::vector<float> mine(static_cast<size_t>(count));
    std::vector<float> expected(mine.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      mine[i] = static_cast<float>(nccl_->rank() * 1000 + static_cast<int>(i % 1000));
      expected[i] = static_cast<float>(i % 1000);
    }
    DeviceBuffer<float> buffer(mine);
    nccl_->broadcast(buffer.get(), count, DType::Float32, 0);
    EXPECT_EQ(first_mismatch(buffer.to_host(), expected, 0), -1);
  }
}

TEST_F(NcclTest, Allgather) {
  constexpr int64_t kCount = 1000;
  const int n = nccl_->world_size();
  std::vector<double> mine(kCount);
  for (int64_t i = 0; i < kCount; ++i) mine[static_cast<size_t>(i)] = nccl_->rank() * 10000.0 + static_cast<double>(i);
  std::vector<double> expected(static_cast<size_t>(n * kCount));
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < kCount; ++i) {
      expected[static_cast<size_t>(r * kCount + i)] = r * 10000.0 + static_cast<double>(i);
    }
  }
  DeviceBuffer<double> send(mine);
  DeviceBuffer<double> receive(n * kCount);
  nccl_->allgather(send.get(), receive.get(), kCount, DType::Float64);
  EXPECT_EQ(first_mismatch(receive.to_host(), expected, 0), -1);
}

TEST_F(NcclTest, Barrier) {
  nccl_->barrier();
  nccl_->barrier();
  EXPECT_EQ(nccl_->stats().barrier_calls, 2);
}

// A rank-dependent element count fails on every rank, naming the range, and
// leaves the communicator usable (nothing was sent).
TEST_F(NcclTest, MismatchedCountThrowsOnEveryRank) {
  if (nccl_->world_size() < 2) GTEST_SKIP() << "needs 2 or more ranks (mpirun -np 2, one GPU each)";
  const int64_t count = 10 + nccl_->rank();
  DeviceBuffer<float> buffer(std::vector<float>(static_cast<size_t>(count), 1.0f));
  try {
    nccl_->allreduce(buffer.get(), count, DType::Float32, ReduceOp::Sum);
    ADD_FAILURE() << "no CommError on rank " << nccl_->rank();
  } catch (const CommError& error) {
    EXPECT_NE(std::string(error.what()).find("different element counts"), std::string::npos) << error.what();
  }
  nccl_->barrier();
}

// The gradients of a small MLP on this rank's GPU, the same on every rank.
struct GpuMlp {
  explicit GpuMlp(Device device) : generator(3), model({16, 32, 32, 4}, generator) { model.to(device); }
  void backward(Device device) {
    Generator data(5);
    const Tensor x = to(normal({8, 16}, 0, 1, DType::Float32, data), device);
    const Tensor y = to(randint(4, {8}, data), device);
    cross_entropy(model.forward(x), y).backward();
  }
  Generator generator;
  nn::MLP model;
};

std::vector<std::vector<float>> host_grads(const std::vector<Tensor>& params) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : params) out.push_back(p.grad().to_vector<float>());
  return out;
}

TEST_F(NcclTest, BucketedGradientAveragingWorksOnGpuTensors) {
  const Device device = Device::cuda(nccl_->device());
  GpuMlp mlp(device);
  mlp.backward(device);
  const std::vector<Tensor> params = mlp.model.parameters();
  const auto before = host_grads(params);
  nccl_->reset_stats();
  // 2 KiB buckets: several tensors share one, copied through a flat buffer.
  average_gradients(*nccl_, params, 2048);
  EXPECT_EQ(nccl_->stats().allreduce_calls, static_cast<int64_t>(plan_buckets(params, 2048).size()));
  const auto after = host_grads(params);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(first_mismatch(after[i], before[i], 1e-6), -1) << "parameter " << i;  // every rank's are equal
  }
}

TEST_F(NcclTest, AnAcceleratorTrainsOnTheGpuThroughNcclAsOnTheCpu) {
  // Two windows of two micro-batches, on the GPU through NCCL and on the CPU
  // alone; every rank has the same batches, so the average is the local one.
  const auto run = [&](Device device, std::shared_ptr<Communicator> comm) {
    train::Accelerator accelerator({.gradient_accumulation_steps = 2, .device = device, .communicator = comm});
    Generator init(3);
    nn::MLP model({16, 32, 4}, init);
    accelerator.prepare(model);
    optim::SGD sgd(model.parameters(), {.lr = 0.1});
    train::PreparedOptimizer optimizer = accelerator.prepare(sgd);
    Generator data(5);
    for (int micro = 0; micro < 4; ++micro) {
      const Tensor x = to(normal({8, 16}, 0, 1, DType::Float32, data), accelerator.device());
      const Tensor y = to(randint(4, {8}, data), accelerator.device());
      auto window = accelerator.accumulate(model);
      accelerator.backward(cross_entropy(model.forward(x), y));
      optimizer.step();
      optimizer.zero_grad();
    }
    std::vector<std::vector<float>> weights;
    for (const Tensor& p : model.parameters()) weights.push_back(p.to_vector<float>());
    return weights;
  };
  const std::shared_ptr<Communicator> nccl(nccl_.get(), [](Communicator*) {});  // owned by the fixture
  const auto gpu = run(Device::cuda(nccl_->device()), nccl);
  const auto cpu = run(Device::cpu(), std::make_shared<SingleProcess>());
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i) EXPECT_EQ(first_mismatch(gpu[i], cpu[i], 1e-5), -1) << "parameter " << i;
}

// A tensor an op has just written: the op is queued on the compute stream
// and may not have run when the collective starts on NCCL's own stream. The
// tensor overloads wait for the compute stream first, so the collective
// reduces the op's values (the emulated NCCL reports a collective that
// would race queued work of another stream).
TEST_F(NcclTest, CollectivesOnATensorAnOpJustWroteSeeItsValues) {
  const Device device = Device::cuda(nccl_->device());
  const int n = nccl_->world_size();
  constexpr int64_t kCount = 5000;  // several blocks of the elementwise kernel
  std::vector<float> values(kCount);
  for (int64_t i = 0; i < kCount; ++i) values[static_cast<size_t>(i)] = static_cast<float>(i % 13);
  const Tensor x = to(from_vector(values, {kCount}), device);

  const Tensor doubled = mul(x, 2.0);  // queued, not waited for
  nccl_->allreduce(doubled, ReduceOp::Sum);
  std::vector<float> expected(values.size());
  for (size_t i = 0; i < values.size(); ++i) expected[i] = 2.0f * values[i] * static_cast<float>(n);
  EXPECT_EQ(first_mismatch(doubled.to_vector<float>(), expected, 0), -1);

  const Tensor scaled = mul(x, 3.0 + nccl_->rank());  // root 0 sends 3x
  nccl_->broadcast(scaled, 0);
  for (size_t i = 0; i < values.size(); ++i) expected[i] = 3.0f * values[i];
  EXPECT_EQ(first_mismatch(scaled.to_vector<float>(), expected, 0), -1);
}

#if REMAT_CUDA_EMULATION
// The work that wrote the tensor failed (a GEMM told to read far past its
// operand, which the emulated GPU reports when it runs): an error naming
// it, thrown after the ranks agreed that this one's call is invalid, so the
// communicator stays usable.
TEST_F(NcclTest, AFailedWriterIsAnErrorAndLeavesTheCommunicatorUsable) {
  const Device device = Device::cuda(nccl_->device());
  const Tensor operand = zeros({16}, DType::Float32, device), out = zeros({16}, DType::Float32, device);
  kernels::cuda::gemm<float>(false, false, 4, 4, 4, 1.0f, operand.data<float>(), int64_t{1} << 24,
                             operand.data<float>(), 4, 0.0f, out.data<float>(), 4,
                             kernels::cuda::compute_stream(nccl_->device()));
  try {
    nccl_->allreduce(out, ReduceOp::Sum);
    ADD_FAILURE() << "no error";
  } catch (const CommError& error) {
    EXPECT_NE(std::string(error.what()).find("the work that wrote the tensor"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("cublasSgemm"), std::string::npos) << error.what();
  }
  nccl_->allreduce(out, ReduceOp::Sum);
}
#endif

TEST_F(NcclTest, RejectsCpuTensor) {
  const Tensor cpu({4}, DType::Float32);
  EXPECT_THROW(nccl_->allreduce(cpu, ReduceOp::Sum), Error);
  EXPECT_EQ(nccl_->backend(), "nccl");
}

}  // namespace
}  // namespace remat::comm

#endif  // REMAT_HAVE_NCCL
