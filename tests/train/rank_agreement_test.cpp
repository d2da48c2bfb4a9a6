// The settings check of a job, on two ranks that are two threads of this
// process: agreeing ranks pass with one allgather; a difference is the same
// error on both ranks, naming each differing setting and every rank's value.
// (The same check under mpirun: tests/CMakeLists.txt, tools.mpi.*disagree*.)
#include "train/rank_agreement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cstring>
#include <thread>

#include "engine/error.h"

namespace remat::train {
namespace {

// Two ranks in one process: each collective meets at a barrier.
struct Meeting {
  std::barrier<> sync{2};
  std::vector<char> sent[2];
  comm::AgreementValues values[2];
};

class ThreadRank final : public comm::Communicator {
 public:
  ThreadRank(Meeting& meeting, int rank) : meeting_(meeting), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return 2; }
  std::string_view backend() const override { return "threads"; }
  [[noreturn]] void abort(int) override { std::abort(); }

 protected:
  void exchange_maximum(comm::AgreementValues& values) override {
    meeting_.values[rank_] = values;
    meeting_.sync.arrive_and_wait();
    for (size_t i = 0; i < values.size(); ++i) values[i] = std::max(meeting_.values[0][i], meeting_.values[1][i]);
    meeting_.sync.arrive_and_wait();
  }
  void do_allgather(const void* send, void* receive, int64_t count, DType dtype) override {
    const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
    meeting_.sent[rank_].assign(static_cast<const char*>(send), static_cast<const char*>(send) + bytes);
    meeting_.sync.arrive_and_wait();
    for (int r = 0; r < 2; ++r) std::memcpy(static_cast<char*>(receive) + r * bytes, meeting_.sent[r].data(), bytes);
    meeting_.sync.arrive_and_wait();
  }
  void do_allreduce(void*, int64_t, DType, comm::ReduceOp) override { REMAT_FAIL("not used"); }
  void do_broadcast(void*, int64_t, DType, int) override { REMAT_FAIL("not used"); }
  void do_barrier() override { meeting_.sync.arrive_and_wait(); }
  bool reaches(Device device) const override { return device.is_cpu(); }

 private:
  Meeting& meeting_;
  int rank_;
};

struct RankOutcome {
  std::string error;
  int64_t allgathers = 0;
};

// Runs the check on two ranks given settings[0] and settings[1].
std::array<RankOutcome, 2> check_on_two_ranks(const std::array<std::vector<Setting>, 2>& settings) {
  Meeting meeting;
  std::array<RankOutcome, 2> outcomes;
  auto run = [&](int rank) {
    ThreadRank communicator(meeting, rank);
    try {
      check_ranks_agree(communicator, settings[rank], "train");
    } catch (const Error& e) {
      outcomes[rank].error = e.what();
    }
    outcomes[rank].allgathers = communicator.stats().allgather_calls;
  };
  std::thread other(run, 1);
  run(0);
  other.join();
  return outcomes;
}

TEST(RankAgreement, AgreeingRanksPassWithOneAllgather) {
  const std::vector<Setting> same{{"--max-steps", "10"}, {"--batch-size", "4"}};
  for (const RankOutcome& outcome : check_on_two_ranks({same, same})) {
    EXPECT_EQ(outcome.error, "");
    EXPECT_EQ(outcome.allgathers, 1);
  }
}

TEST(RankAgreement, EveryRankNamesTheSettingsAndTheirValues) {
  const std::vector<Setting> rank0{{"--max-steps", "10"}, {"--batch-size", "4"}, {"--lr", "0.003"},
                                   {"--gradient-accumulation-steps", "1"}};
  const std::vector<Setting> rank1{{"--max-steps", "20"}, {"--batch-size", "4"}, {"--lr", "0.003"},
                                   {"--gradient-accumulation-steps", "12"}};
  for (const RankOutcome& outcome : check_on_two_ranks({rank0, rank1})) {
    EXPECT_NE(outcome.error.find("train: the ranks were given different settings"), std::string::npos)
        << outcome.error;
    EXPECT_NE(outcome.error.find("--max-steps: rank 0 has 10, rank 1 has 20; --gradient-accumulation-steps: rank 0 "
                                 "has 1, rank 1 has 12"), std::string::npos) << outcome.error;
    EXPECT_EQ(outcome.error.find("--batch-size"), std::string::npos) << outcome.error;  // they agree on it
  }
}

TEST(RankAgreement, AnEmptyValueIsShown) {
  const auto outcomes = check_on_two_ranks({{{{"--diloco", ""}}, {{"--diloco", "outer lr 0.7, momentum 0.9"}}}});
  EXPECT_NE(outcomes[0].error.find("--diloco: rank 0 has '', rank 1 has outer lr 0.7, momentum 0.9"),
            std::string::npos) << outcomes[0].error;
}

TEST(RankAgreement, OneProcessHasNothingToCheck) {
  comm::SingleProcess single;
  check_ranks_agree(single, {{"--max-steps", "10"}}, "train");
  EXPECT_EQ(single.stats().allgather_calls, 0);
}

}  // namespace
}  // namespace remat::train
