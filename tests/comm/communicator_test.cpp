// Collectives on every backend this run reaches: world size 1 alone, MPI
// under mpirun (CTest label mpi runs this program with 2 and 4 ranks).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>

#include "comm/buckets.h"
#include "comm/mpi.h"
#include "comm/watchdog.h"
#include "engine/factory.h"
#include "tests/comm/world.h"
#include "tests/support/errors.h"

namespace remat::comm {
namespace {

using remat::testing::contains;
using remat::testing::error_of;
using remat::testing::test_world;

// Element i of rank r: (r + 1) * (i % 97 + 1), exact in every dtype; the sum
// over ranks is (i % 97 + 1) * w (w + 1) / 2.
template <class T>
Tensor ranked(int64_t n, int rank) {
  Tensor t({n}, dtype_of<T>());
  for (int64_t i = 0; i < n; ++i) t.data<T>()[i] = static_cast<T>((rank + 1) * (i % 97 + 1));
  return t;
}

template <class T>
void expect_sum(const Tensor& t, int world, double divide_by) {
  const double ranks = world * (world + 1) / 2.0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double expected = static_cast<double>(i % 97 + 1) * ranks / divide_by;
    ASSERT_EQ(static_cast<double>(t.data<T>()[i]), static_cast<double>(static_cast<T>(expected))) << "element " << i;
  }
}

template <class T>
void check_allreduce(Communicator& comm) {
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{1} << 20}) {
    Tensor sum = ranked<T>(n, comm.rank());
    comm.allreduce(sum, ReduceOp::Sum);
    expect_sum<T>(sum, comm.world_size(), 1.0);
    if constexpr (!std::is_same_v<T, int64_t>) {
      Tensor mean = ranked<T>(n, comm.rank());
      comm.allreduce(mean, ReduceOp::Average);
      expect_sum<T>(mean, comm.world_size(), comm.world_size());
    }
  }
}

TEST(Communicator, AllreduceSumsAndAveragesEveryDtypeAndSize) {
  auto comm = test_world();
  check_allreduce<float>(*comm);
  check_allreduce<double>(*comm);
  check_allreduce<int64_t>(*comm);
  EXPECT_EQ(comm->stats().allreduce_calls, 3 * 2 + 3 * 2 + 3);
  const int64_t elements = 1 + 1000 + (int64_t{1} << 20);
  EXPECT_EQ(comm->stats().allreduce_bytes, elements * (4 * 2 + 8 * 2 + 8));
  EXPECT_GT(comm->stats().seconds, 0.0);
}

TEST(Communicator, AverageOfIntegersIsAnError) {
  auto comm = test_world();
  Tensor t = ranked<int64_t>(4, comm->rank());
  EXPECT_TRUE(contains(error_of([&] { comm->allreduce(t, ReduceOp::Average); }), "average of int64"));
}

TEST(Communicator, BroadcastFromFirstAndLastRank) {
  auto comm = test_world();
  for (int root : {0, comm->world_size() - 1}) {
    Tensor t = ranked<float>(5000, comm->rank());
    comm->broadcast(t, root);
    const Tensor expected = ranked<float>(5000, root);
    EXPECT_EQ(std::memcmp(t.raw_data(), expected.raw_data(), t.nbytes()), 0) << "root " << root;
  }
  EXPECT_TRUE(contains(error_of([&] { comm->broadcast(ranked<float>(2, 0), comm->world_size()); }), "is not a rank"));
}

TEST(Communicator, AllgatherPutsEachRankAtItsOffset) {
  auto comm = test_world();
  const int w = comm->world_size();
  const Tensor mine = ranked<double>(3, comm->rank());
  Tensor all({3 * w}, DType::Float64);
  comm->allgather(mine.raw_data(), all.raw_data(), 3, DType::Float64);
  for (int r = 0; r < w; ++r) {
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(all.data<double>()[r * 3 + i], (r + 1) * (i + 1));
  }
}

TEST(Communicator, DifferentSizesAcrossRanksAreAnErrorOnEveryRank) {
  auto comm = test_world();
  if (comm->world_size() == 1) GTEST_SKIP() << "needs two ranks or more (CTest label mpi runs this under mpirun)";
  Tensor t = ranked<float>(10 + comm->rank(), comm->rank());
  const std::string message = error_of([&] { comm->allreduce(t, ReduceOp::Sum); });
  EXPECT_TRUE(contains(message, "different element counts across ranks")) << message;
  EXPECT_TRUE(contains(message, "from 10 to " + std::to_string(9 + comm->world_size()))) << message;
  // The check left the communicator usable.
  Tensor same = ranked<float>(10, comm->rank());
  comm->allreduce(same, ReduceOp::Sum);
  expect_sum<float>(same, comm->world_size(), 1.0);
}

TEST(Communicator, DifferentDtypesAcrossRanksAreAnError) {
  auto comm = test_world();
  if (comm->world_size() == 1) GTEST_SKIP() << "needs two ranks or more (CTest label mpi runs this under mpirun)";
  Tensor t = comm->rank() == 0 ? ranked<float>(8, 0) : ranked<double>(8, comm->rank());
  EXPECT_TRUE(contains(error_of([&] { comm->allreduce(t, ReduceOp::Sum); }), "different dtypes"));
}

TEST(Communicator, InvalidArgumentsOnOneRankFailEveryRankAtOnce) {
  auto comm = test_world();
  if (comm->world_size() == 1) GTEST_SKIP() << "needs two ranks or more (CTest label mpi runs this under mpirun)";
  // Rank 0 passes a strided view; the others a good tensor of the same size.
  const Tensor base = ranked<float>(16, comm->rank());
  const Tensor t = comm->rank() == 0 ? base.alias({8}, {2}, 0) : ranked<float>(8, comm->rank());
  const std::string message = error_of([&] { comm->allreduce(t, ReduceOp::Sum); });
  if (comm->rank() == 0) {
    EXPECT_TRUE(contains(message, "must be contiguous")) << message;
  } else {
    EXPECT_TRUE(contains(message, "another rank's arguments to allreduce were invalid")) << message;
  }
  comm->barrier();  // still usable
}

TEST(Watchdog, CallsThatFinishInTimeLeaveTheProcessAlone) {
  Watchdog watchdog(0.05, "test");
  for (int i = 0; i < 10; ++i) {
    const auto watch = watchdog.watch("a short wait");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // unarmed: nothing happens
  SUCCEED();
}

TEST(Watchdog, AWaitPastTheTimeoutEndsTheProcessNamingIt) {
  if (Mpi::launched_by_mpi()) GTEST_SKIP() << "a death test forks; run alone, not under mpirun";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog watchdog(0.05, "mpi: rank 0 of 2");
        const auto watch = watchdog.watch("allreduce");
        std::this_thread::sleep_for(std::chrono::seconds(5));
      },
      ::testing::ExitedWithCode(kWatchdogExitCode), "mpi: rank 0 of 2: allreduce got no answer within 0.05 s");
}

TEST(Buckets, PlanKeepsOrderSplitsByBytesAndDtype) {
  const std::vector<Tensor> tensors{zeros({10}), zeros({10}), zeros({30}), zeros({4}, DType::Float64), zeros({1})};
  // 40 + 40 fit in 100 bytes, 120 alone (over the limit), a dtype change, then float32 again.
  const auto buckets = plan_buckets(tensors, 100);
  const std::vector<std::vector<size_t>> expected{{0, 1}, {2}, {3}, {4}};
  EXPECT_EQ(buckets, expected);
  EXPECT_EQ(plan_buckets(tensors, int64_t{1} << 20).size(), 3u);
  EXPECT_TRUE(contains(error_of([&] { plan_buckets(tensors, 0); }), "bucket_bytes must be > 0"));
}

TEST(Buckets, AllreduceAndBroadcastInBucketsOfEverySize) {
  auto comm = test_world();
  const std::vector<int64_t> sizes{1, 7, 1000, 33, 4096, 2};
  for (int64_t bucket_bytes : {int64_t{64}, int64_t{4096}, int64_t{1} << 20}) {
    std::vector<Tensor> tensors;
    for (int64_t n : sizes) tensors.push_back(ranked<float>(n, comm->rank()));
    comm->reset_stats();
    allreduce_buckets(*comm, tensors, ReduceOp::Sum, bucket_bytes);
    EXPECT_EQ(comm->stats().allreduce_calls, static_cast<int64_t>(plan_buckets(tensors, bucket_bytes).size()));
    for (const Tensor& t : tensors) expect_sum<float>(t, comm->world_size(), 1.0);

    std::vector<Tensor> broadcast;
    for (int64_t n : sizes) broadcast.push_back(ranked<double>(n, comm->rank()));
    broadcast_buckets(*comm, broadcast, 0, bucket_bytes);
    for (size_t k = 0; k < sizes.size(); ++k) {
      EXPECT_EQ(broadcast[k].to_vector<double>(), ranked<double>(sizes[k], 0).to_vector<double>());
    }
  }
}

TEST(Buckets, AverageGradientsGivesMissingGradientsZeros) {
  auto comm = test_world();
  Tensor a = zeros({3}).requires_grad_();
  Tensor b = zeros({2}).requires_grad_();
  a.set_grad(full({3}, 2.0 * (comm->rank() + 1)));
  // b has a gradient on rank 0 only: the others take zeros.
  if (comm->rank() == 0) b.set_grad(full({2}, 6.0));
  average_gradients(*comm, {a, b}, kDefaultBucketBytes);
  const double w = comm->world_size();
  for (float g : a.grad().to_vector<float>()) EXPECT_FLOAT_EQ(g, static_cast<float>((w + 1)));
  for (float g : b.grad().to_vector<float>()) EXPECT_FLOAT_EQ(g, static_cast<float>(6.0 / w));
}

}  // namespace
}  // namespace remat::comm
