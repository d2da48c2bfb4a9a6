// Data parallelism, gradient accumulation and LocalSGD (train/accelerator.h,
// train/local_sgd.h) against their single-process definitions. These live
// with the comm tests because they need the same program to run under
// mpirun (CTest label mpi: 2 and 4 ranks); alone they run with world size 1.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/factory.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "optim/sgd.h"
#include "tests/comm/world.h"
#include "tests/support/errors.h"
#include "train/accelerator.h"
#include "train/local_sgd.h"

namespace remat::train {
namespace {

using remat::testing::contains;
using remat::testing::error_of;
using remat::testing::test_world;

constexpr int64_t kFeatures = 6;
constexpr int64_t kClasses = 3;

// Rows of a fixed random classification problem, float64.
data::Dataset problem(int64_t rows) {
  Generator generator(11);
  data::Dataset set{normal({rows, kFeatures}, 0.0, 1.0, DType::Float64, generator), Tensor({rows}, DType::Int64)};
  for (int64_t i = 0; i < rows; ++i) set.targets.data<int64_t>()[i] = (i * 7 + i / 3) % kClasses;
  return set;
}

std::unique_ptr<nn::MLP> model() {
  Generator generator(5);
  return std::make_unique<nn::MLP>(std::vector<int64_t>{kFeatures, 8, kClasses}, generator, DType::Float64);
}

std::vector<double> flat_parameters(const nn::Module& m) {
  std::vector<double> out;
  for (const Tensor& p : m.parameters()) {
    const std::vector<double> values = p.to_vector<double>();
    out.insert(out.end(), values.begin(), values.end());
  }
  return out;
}

void expect_near(const std::vector<double>& a, const std::vector<double>& b, double tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tolerance) << "parameter element " << i;
}

struct Recipe {
  int64_t batch_size = 4;
  int64_t accumulation = 1;
  int64_t epochs = 2;
  int64_t rows = 96;
  std::optional<LocalSGDOptions> local_sgd;
  // Called after each LocalSGD step with the guard, on every rank.
  std::function<void(const LocalSGD&, const nn::Module&)> after_step;
};

// Trains the MLP with plain SGD through an Accelerator on `comm`, the seed's
// loop; returns the final parameters and leaves the traffic in comm's stats.
std::vector<double> train(const Recipe& run, std::shared_ptr<comm::Communicator> comm) {
  Accelerator accelerator({.gradient_accumulation_steps = run.accumulation, .communicator = comm});
  auto net = model();
  accelerator.prepare(*net);
  optim::SGD sgd(net->parameters(), {.lr = 0.1, .weight_decay = 0.01});
  auto optimizer = accelerator.prepare(sgd);
  const data::DataLoader loader =
      accelerator.prepare(data::DataLoader(problem(run.rows), {.batch_size = run.batch_size, .shuffle = true,
                                                               .seed = 3}));
  for (int64_t epoch = 0; epoch < run.epochs; ++epoch) {
    LocalSGD local_sgd(accelerator, *net, run.local_sgd.value_or(LocalSGDOptions{.enabled = false}));
    for (const data::Batch& batch : loader.epoch(epoch)) {
      auto window = accelerator.accumulate(*net);
      accelerator.backward(cross_entropy(net->forward(batch.inputs), batch.targets));
      optimizer.step();
      optimizer.zero_grad();
      local_sgd.step();
      if (run.after_step) run.after_step(local_sgd, *net);
    }
  }
  return flat_parameters(*net);
}

std::shared_ptr<comm::Communicator> alone() { return std::make_shared<comm::SingleProcess>(); }

TEST(DataParallel, NRanksEqualOneProcessOnTheNTimesBatch) {
  auto world = test_world();
  const int64_t n = world->world_size();
  const std::vector<double> parallel = train({.batch_size = 4}, world);
  const std::vector<double> single = train({.batch_size = 4 * n}, alone());
  expect_near(parallel, single, 1e-12);
}

TEST(DataParallel, KMicroBatchesEqualOneKTimesBatchWithAShortLastWindow) {
  // 42 rows in batches of 4: 11 batches, the last of 2 rows; windows of 3
  // hold 12, 12, 12 and 6 rows, as batches of 12 do.
  const std::vector<double> accumulated = train({.batch_size = 4, .accumulation = 3, .rows = 42}, alone());
  const std::vector<double> large = train({.batch_size = 12, .rows = 42}, alone());
  expect_near(accumulated, large, 1e-12);
}

TEST(DataParallel, AccumulationAcrossRanksEqualsOneLargeBatch) {
  auto world = test_world();
  const int64_t n = world->world_size();
  const std::vector<double> parallel = train({.batch_size = 2, .accumulation = 2}, world);
  const std::vector<double> single = train({.batch_size = 4 * n}, alone());
  expect_near(parallel, single, 1e-12);
}

TEST(LocalSGD, OneStepBetweenAveragesEqualsDataParallel) {
  auto world = test_world();
  const std::vector<double> parallel = train({}, world);
  const int64_t data_parallel_calls = world->stats().allreduce_calls;
  world->reset_stats();
  const std::vector<double> local = train({.local_sgd = LocalSGDOptions{.local_sgd_steps = 1}}, world);
  expect_near(local, parallel, 1e-12);
  EXPECT_EQ(world->stats().allreduce_calls, data_parallel_calls);
}

TEST(LocalSGD, EveryRankHoldsBitIdenticalParametersAfterEachAverage) {
  auto world = test_world();
  int64_t checked = 0;
  const Recipe run{.local_sgd = LocalSGDOptions{.local_sgd_steps = 3},
                .after_step = [&](const LocalSGD& guard, const nn::Module& net) {
                  if (guard.steps() % 3 != 0) return;
                  const std::vector<double> mine = flat_parameters(net);
                  std::vector<double> all(mine.size() * static_cast<size_t>(world->world_size()));
                  world->allgather(mine.data(), all.data(), static_cast<int64_t>(mine.size()), DType::Float64);
                  for (int r = 0; r < world->world_size(); ++r) {
                    ASSERT_EQ(std::memcmp(all.data() + r * mine.size(), mine.data(), mine.size() * sizeof(double)), 0)
                        << "rank " << r << " differs after step " << guard.steps();
                  }
                  ++checked;
                }};
  train(run, world);
  // Two epochs of 96 / (4 w) steps each, an average every third step of each.
  EXPECT_EQ(checked, 2 * (96 / (4 * world->world_size()) / 3));
}

TEST(LocalSGD, MakesOneHthOfDataParallelsAllreduceCalls) {
  auto world = test_world();
  if (world->world_size() == 1) GTEST_SKIP() << "with one process LocalSGD never communicates";
  // 96 rows over w ranks in batches of 4; H must divide the steps of an
  // epoch, or the guard's last average comes on top.
  const int64_t steps_per_epoch = 96 / (4 * world->world_size());
  for (int64_t h : {2, 3, 6}) {
    if (steps_per_epoch % h != 0) continue;
    world->reset_stats();
    train({}, world);
    const int64_t data_parallel_calls = world->stats().allreduce_calls;
    world->reset_stats();
    train({.local_sgd = LocalSGDOptions{.local_sgd_steps = h}}, world);
    EXPECT_EQ(world->stats().allreduce_calls * h, data_parallel_calls) << "H = " << h;
  }
}

TEST(LocalSGD, CountsOptimizerStepsNotMicroBatches) {
  auto world = test_world();
  int64_t last_steps = 0;
  train({.batch_size = 2, .accumulation = 2, .epochs = 1,
         .local_sgd = LocalSGDOptions{.local_sgd_steps = 2},
         .after_step = [&](const LocalSGD& guard, const nn::Module&) { last_steps = guard.steps(); }},
        world);
  // 96 rows per epoch over w ranks in micro-batches of 2, windows of 2.
  EXPECT_EQ(last_steps, 96 / world->world_size() / 4);
}

TEST(LocalSGD, DisabledOrAloneChangesNothing) {
  auto world = test_world();
  world->reset_stats();
  const std::vector<double> parallel = train({}, world);
  const int64_t calls = world->stats().allreduce_calls;
  world->reset_stats();
  const std::vector<double> disabled =
      train({.local_sgd = LocalSGDOptions{.local_sgd_steps = 4, .enabled = false}}, world);
  EXPECT_EQ(disabled, parallel);
  EXPECT_EQ(world->stats().allreduce_calls, calls);
  const std::vector<double> single = train({}, alone());
  EXPECT_EQ(train({.local_sgd = LocalSGDOptions{.local_sgd_steps = 4}}, alone()), single);
}

TEST(LocalSGD, AnAbandonedGuardEndsWithoutTheLastAverage) {
  auto world = test_world();
  if (world->world_size() == 1) GTEST_SKIP() << "with one process LocalSGD never communicates";
  Accelerator accelerator({.communicator = world});
  auto net = model();
  accelerator.prepare(*net);
  world->reset_stats();
  {
    LocalSGD local_sgd(accelerator, *net, {.local_sgd_steps = 4});
    EXPECT_FALSE(accelerator.gradient_allreduce());
    local_sgd.step();  // a step since the last average: leaving would average
    local_sgd.abandon();
  }
  EXPECT_EQ(world->stats().allreduce_calls, 0);
  EXPECT_TRUE(accelerator.gradient_allreduce());  // given back all the same
  {
    LocalSGD local_sgd(accelerator, *net, {.local_sgd_steps = 4});
    local_sgd.step();
  }
  EXPECT_EQ(world->stats().allreduce_calls, 1);
}

TEST(LocalSGD, DiLoCoWithUnitOuterStepAndNoMomentumIsPlainAveraging) {
  auto world = test_world();
  const std::vector<double> plain = train({.local_sgd = LocalSGDOptions{.local_sgd_steps = 2}}, world);
  const std::vector<double> diloco = train(
      {.local_sgd = LocalSGDOptions{.local_sgd_steps = 2, .diloco = comm::DiLoCoOptions{.outer_lr = 1, .momentum = 0}}},
      world);
  expect_near(diloco, plain, 1e-12);
}

TEST(ModelAverager, DiLoCoStateRoundTripsAndRejectsAnotherShape) {
  comm::SingleProcess alone_comm;
  Tensor p = full({3}, 1.0);
  comm::ModelAverager averager(alone_comm, {p}, {.diloco = comm::DiLoCoOptions{}});
  p.data<float>()[0] = 0.5f;  // a local step moved the parameter
  averager.sync();            // outer step: previous and velocity change
  const auto state = averager.state_dict();
  ASSERT_EQ(state.size(), 2u);
  std::vector<std::pair<std::string, Tensor>> saved;
  for (const auto& [name, t] : state) saved.emplace_back(name, contiguous_copy(t));

  Tensor q = full({3}, 1.0);
  comm::ModelAverager restored(alone_comm, {q}, {.diloco = comm::DiLoCoOptions{}});
  restored.load_state_dict(saved);
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(restored.state_dict()[i].second.to_vector<float>(), state[i].second.to_vector<float>());
  }
  std::vector<std::pair<std::string, Tensor>> wrong{{"diloco.previous.0", full({4}, 1.0)},
                                                    {"diloco.velocity.0", full({3}, 1.0)}};
  EXPECT_TRUE(contains(error_of([&] { restored.load_state_dict(wrong); }), "diloco.previous.0"));
  // Nesterov by hand: delta 0.5 on element 0, velocity 0.5, previous 1 - 0.7 (0.5 + 0.9 * 0.5).
  EXPECT_FLOAT_EQ(p.data<float>()[0], 1.0f - 0.7f * (0.5f + 0.9f * 0.5f));
  EXPECT_FLOAT_EQ(p.data<float>()[1], 1.0f);
}

TEST(ModelAverager, DiLoCoStartsEveryRankFromRankZerosParameters) {
  auto world = test_world();
  Tensor p = full({4}, 1.0 + world->rank(), DType::Float64);
  comm::ModelAverager averager(*world, {p}, {.diloco = comm::DiLoCoOptions{}});
  for (double v : p.to_vector<double>()) EXPECT_EQ(v, 1.0);
  averager.sync();  // nothing moved locally: the outer step keeps them
  for (double v : p.to_vector<double>()) EXPECT_EQ(v, 1.0);
}

TEST(Accelerator, SyncFlagOutlivesTheWindowGuardUntilTheNextMicroBatch) {
  Accelerator accelerator({.gradient_accumulation_steps = 2, .communicator = alone()});
  auto net = model();
  accelerator.prepare(*net);
  std::vector<bool> flags;
  for (int i = 0; i < 4; ++i) {
    { auto window = accelerator.accumulate(*net); }
    flags.push_back(accelerator.sync_gradients());
  }
  EXPECT_EQ(flags, (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(accelerator.optimizer_steps(), 2);
}

TEST(Accelerator, EpochLengthCannotPassThePreparedLoader) {
  Accelerator accelerator({.gradient_accumulation_steps = 2, .communicator = alone()});
  const data::DataLoader loader = accelerator.prepare(data::DataLoader(problem(10), {.batch_size = 4}));
  EXPECT_TRUE(contains(error_of([&] { accelerator.set_epoch_length(4); }),
                       "epoch length 4 is longer than the prepared loader's 3 batches"));
  accelerator.set_epoch_length(2);  // an epoch stopped early: two full batches, one window
  auto net = model();
  { auto window = accelerator.accumulate(*net); EXPECT_FALSE(accelerator.sync_gradients()); }
  { auto window = accelerator.accumulate(*net); EXPECT_TRUE(accelerator.sync_gradients()); }
  // A second loader (for evaluation) is sharded but leaves the epochs alone.
  accelerator.prepare(data::DataLoader(problem(7), {.batch_size = 7}));
  { auto window = accelerator.accumulate(*net); EXPECT_FALSE(accelerator.sync_gradients()); }
}

TEST(Accelerator, GatherConcatenatesInRankOrder) {
  auto world = test_world();
  Accelerator accelerator({.communicator = world});
  const Tensor mine = full({2}, static_cast<double>(accelerator.rank()), DType::Float64);
  const std::vector<double> all = accelerator.gather(mine).to_vector<double>();
  ASSERT_EQ(all.size(), 2u * static_cast<size_t>(accelerator.num_processes()));
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], static_cast<double>(i / 2));
}

TEST(Accelerator, RejectsBadOptionsAndMisuse) {
  EXPECT_TRUE(contains(error_of([] { Accelerator({.gradient_accumulation_steps = 0, .communicator = alone()}); }),
                       "gradient_accumulation_steps must be >= 1, got 0"));
  Accelerator accelerator({.gradient_accumulation_steps = 2, .communicator = alone()});
  auto net = model();
  accelerator.prepare(*net);
  const Tensor loss = cross_entropy(net->forward(problem(4).inputs), problem(4).targets);
  EXPECT_TRUE(contains(error_of([&] { accelerator.backward(loss); }), "inside accelerator.accumulate(model)"));
  EXPECT_TRUE(contains(error_of([&] { LocalSGD(accelerator, *net, {.local_sgd_steps = 0}); }),
                       "local_sgd_steps must be >= 1, got 0"));
}

}  // namespace
}  // namespace remat::train
