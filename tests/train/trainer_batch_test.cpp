// The Trainer's auto_find_batch_size (train/trainer_batch.cpp): with a
// memory limit between two batches' predicted peaks it trains at the larger
// that fits; checkpointing lets a larger batch fit the same limit; a limit
// below every batch is an error naming the smallest batch's need; the
// arguments' checks and flags.
#include <gtest/gtest.h>

#include "engine/factory.h"
#include "nn/mlp.h"
#include "tests/support/errors.h"
#include "train/trainer.h"

namespace remat::train {
namespace {

using testing::contains;
using testing::error_of;

// 256 rows of 64 features, 8 classes: a batch's activations outweigh
// nothing else by much, so the batch decides the peak.
data::Dataset rows() {
  Generator g(5);
  return {normal({256, 64}, 0, 1, DType::Float32, g), randint(8, {256}, g)};
}

std::vector<int64_t> widths() { return {64, 256, 256, 256, 256, 256, 256, 8}; }

TrainingArguments args_at(int64_t batch, std::optional<int64_t> limit, bool checkpointing = false) {
  TrainingArguments a;
  a.per_device_train_batch_size = batch;
  a.max_steps = 1;
  a.save_strategy = "no";
  a.logging_steps = 100;
  a.memory_limit = limit;
  a.auto_find_batch_size = limit.has_value();
  a.gradient_checkpointing = checkpointing;
  a.gradient_checkpointing_kwargs.policy = "cost";
  return a;
}

// The predicted peak of a step of `batch` rows (no limit, no checkpointing).
Trainer::BatchFit predicted(int64_t batch) {
  Generator g(3);
  nn::MLP model(widths(), g);
  const data::Dataset data = rows();
  Trainer trainer(model, args_at(batch, std::nullopt), data);
  return trainer.predict_step(batch);
}

// The batch a Trainer chose for `limit`, after a step.
int64_t chosen(int64_t limit, bool checkpointing = false) {
  Generator g(3);
  nn::MLP model(widths(), g);
  const data::Dataset data = rows();
  Trainer trainer(model, args_at(128, limit, checkpointing), data);
  trainer.train();  // the first step checks the choice against the allocator
  return trainer.args().per_device_train_batch_size;
}

TEST(TrainerBatch, ALimitBetweenTwoBatchesPeaksTrainsAtTheLargerThatFits) {
  const Trainer::BatchFit b64 = predicted(64), b128 = predicted(128);
  EXPECT_EQ(b64.policy, "none");
  EXPECT_TRUE(b64.refused.empty());
  ASSERT_LT(b64.total(), b128.total());
  EXPECT_GT(b64.activations, 0);
  EXPECT_LT(b64.resident, b128.resident);  // the batch is resident too
  EXPECT_EQ(chosen((b64.total() + b128.total()) / 2), 64);
  EXPECT_EQ(chosen(b128.total()), 128);  // exactly the peak fits
  EXPECT_EQ(chosen(b64.total() - 1), 32);
}

TEST(TrainerBatch, CheckpointingFitsALargerBatchInTheSameLimit) {
  const Trainer::BatchFit b64 = predicted(64), b128 = predicted(128);
  const int64_t limit = (b64.total() + b128.total()) / 2;
  EXPECT_EQ(chosen(limit, false), 64);
  // cost is given what the limit leaves at batch 128, and plans within it.
  EXPECT_EQ(chosen(limit, true), 128);
}

TEST(TrainerBatch, ALimitBelowEveryBatchIsAnErrorNamingBatchOnesNeed) {
  const Trainer::BatchFit b1 = predicted(1);
  const std::string error = error_of([&] { chosen(b1.total() - 1); });
  EXPECT_TRUE(contains(error, "no batch from per_device_train_batch_size 128 down to 1 fits memory_limit")) << error;
  EXPECT_TRUE(contains(error, "turn gradient_checkpointing on")) << error;
}

TEST(TrainerBatch, ALimitAloneChecksTheBatchGiven) {
  const Trainer::BatchFit b64 = predicted(64), b128 = predicted(128);
  const auto run = [&](int64_t limit) {
    Generator g(3);
    nn::MLP model(widths(), g);
    const data::Dataset data = rows();
    TrainingArguments args = args_at(128, limit);
    args.auto_find_batch_size = false;
    Trainer trainer(model, args, data);
    trainer.train();
    return trainer.args().per_device_train_batch_size;
  };
  EXPECT_EQ(run(b128.total()), 128);
  const std::string error = error_of([&] { run((b64.total() + b128.total()) / 2); });
  EXPECT_TRUE(contains(error, "per_device_train_batch_size 128 does not fit memory_limit")) << error;
  EXPECT_TRUE(contains(error, "give auto_find_batch_size")) << error;
}

TEST(TrainerBatch, TheArgumentsReadByteCountsAndNeedALimit) {
  TrainingArguments a;
  apply_flags(a, {"--auto-find-batch-size", "--memory-limit", "1.5GiB"});
  EXPECT_TRUE(a.auto_find_batch_size);
  EXPECT_EQ(a.memory_limit, int64_t{3} << 29);
  apply_json(a, nlohmann::json::parse(R"({"memory_limit": "256MiB"})"), "test");
  EXPECT_EQ(a.memory_limit, int64_t{256} << 20);
  apply_json(a, nlohmann::json::parse(R"({"memory_limit": 4096})"), "test");
  EXPECT_EQ(a.memory_limit, 4096);
  EXPECT_EQ(to_json(a)["memory_limit"], 4096);
  EXPECT_TRUE(contains(error_of([&] { apply_flags(a, {"--memory-limit", "lots"}); }), "'lots' is not a positive byte count"));
  TrainingArguments no_limit;
  no_limit.auto_find_batch_size = true;
  EXPECT_TRUE(contains(error_of([&] { check(no_limit); }), "auto_find_batch_size: needs memory_limit"));
}

}  // namespace
}  // namespace remat::train
