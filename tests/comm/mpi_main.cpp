// The main of test_comm: one program for every world size. Alone it runs the
// tests with world size 1 (comm::world() is SingleProcess); under mpirun
// every rank runs every test in the same order, and the collectives inside
// meet. Rank 0 prints GoogleTest's report; the other ranks print only their
// failures, marked with the rank, and mpirun fails the job if any rank fails.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "comm/mpi.h"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const bool mpi = remat::comm::Mpi::launched_by_mpi();
  int rank = 0;
  if (mpi) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  }
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  const int status = RUN_ALL_TESTS();
  if (mpi) MPI_Finalize();
  return status;
}
