// TrainingArguments (train/training_arguments.h): Hugging Face's names and
// defaults, read from JSON and from flags, and refused when wrong.
#include "train/training_arguments.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/errors.h"

namespace remat::train {
namespace {

using testing::contains;
using testing::error_of;

TEST(TrainingArguments, DefaultsAreHuggingFaces) {
  const TrainingArguments a;
  EXPECT_EQ(a.num_train_epochs, 3.0);
  EXPECT_EQ(a.per_device_train_batch_size, 8);
  EXPECT_EQ(a.learning_rate, 5e-5);
  EXPECT_EQ(a.adam_beta2, 0.999);
  EXPECT_EQ(a.max_grad_norm, 1.0);
  EXPECT_EQ(a.lr_scheduler_type, "linear");
  EXPECT_EQ(a.eval_strategy, "no");
  EXPECT_EQ(a.save_steps, 500);
  EXPECT_EQ(a.seed, 42u);
  EXPECT_FALSE(a.max_time.has_value());  // no time limit unless asked
  EXPECT_NO_THROW(check(a));
}

// tf32, as Hugging Face's: unset (the process's setting, off), or a bool
// from a bare flag, a value or JSON.
TEST(TrainingArguments, Tf32IsUnsetUnlessGiven) {
  TrainingArguments a;
  EXPECT_FALSE(a.tf32.has_value());
  EXPECT_TRUE(to_json(a)["tf32"].is_null());
  apply_flags(a, {"--tf32"});
  EXPECT_EQ(a.tf32, std::optional<bool>(true));
  apply_flags(a, {"--tf32", "false"});
  EXPECT_EQ(a.tf32, std::optional<bool>(false));
  apply_json(a, nlohmann::json::parse(R"({"tf32": true})"), "test");
  EXPECT_EQ(a.tf32, std::optional<bool>(true));
  EXPECT_TRUE(is_bool_training_argument("tf32"));
}

// fused_epilogues, as tf32: unset (the process's setting, off), or a bool.
TEST(TrainingArguments, FusedEpiloguesAreUnsetUnlessGiven) {
  TrainingArguments a;
  EXPECT_FALSE(a.fused_epilogues.has_value());
  EXPECT_TRUE(to_json(a)["fused_epilogues"].is_null());
  apply_flags(a, {"--fused_epilogues"});
  EXPECT_EQ(a.fused_epilogues, std::optional<bool>(true));
  apply_json(a, nlohmann::json::parse(R"({"fused_epilogues": false})"), "test");
  EXPECT_EQ(a.fused_epilogues, std::optional<bool>(false));
  EXPECT_TRUE(is_bool_training_argument("fused_epilogues"));
}

TEST(TrainingArguments, FlagsTakeEveryFormAndTheOlderEvaluationStrategy) {
  TrainingArguments a;
  apply_flags(a, {"--per-device-train-batch-size", "64", "--learning_rate=3e-4", "--gradient_checkpointing",
                  "--evaluation_strategy", "epoch", "--save_total_limit", "2", "--max_time", "none",
                  "--gradient-checkpointing-kwargs", R"({"policy": "cost", "budget": "64MiB", "must_keep": ["gelu"]})",
                  "--overwrite_output_dir", "false"});
  EXPECT_EQ(a.per_device_train_batch_size, 64);
  EXPECT_EQ(a.learning_rate, 3e-4);
  EXPECT_TRUE(a.gradient_checkpointing);
  EXPECT_EQ(a.eval_strategy, "epoch");
  EXPECT_EQ(a.save_total_limit, 2);
  EXPECT_FALSE(a.max_time.has_value());
  EXPECT_EQ(a.gradient_checkpointing_kwargs.budget, int64_t{64} << 20);
  EXPECT_EQ(a.gradient_checkpointing_kwargs.must_keep, std::vector<std::string>{"gelu"});
  EXPECT_FALSE(a.overwrite_output_dir);
  EXPECT_NO_THROW(check(a));
}

TEST(TrainingArguments, AJsonFileSetsWhatItNamesAndRoundTrips) {
  const auto path = std::filesystem::temp_directory_path() / "remat_training_args_test.json";
  {
    std::ofstream file(path);
    file << R"({"output_dir": "./results", "evaluation_strategy": "epoch", "gradient_accumulation_steps": 4,
                "gradient_checkpointing": true, "max_steps": 100, "warmup_ratio": 0.1, "save_total_limit": null})";
  }
  const TrainingArguments a = load_training_arguments(path.string());
  EXPECT_EQ(a.output_dir, "./results");
  EXPECT_EQ(a.eval_strategy, "epoch");
  EXPECT_EQ(a.gradient_accumulation_steps, 4);
  EXPECT_EQ(a.max_steps, 100);
  EXPECT_EQ(a.warmup_ratio, 0.1);
  TrainingArguments b;
  apply_json(b, nlohmann::json::parse(to_json(a).dump()), "round trip");
  EXPECT_EQ(to_json(b), to_json(a));
  std::filesystem::remove(path);
}

// Hugging Face's cosine_with_min_lr, its floor in lr_scheduler_kwargs.
TEST(TrainingArguments, TheCosinesFloorIsInLrSchedulerKwargs) {
  TrainingArguments a;
  apply_flags(a, {"--lr-scheduler-type", "cosine_with_min_lr", "--lr_scheduler_kwargs", R"({"min_lr_rate": 0.1})"});
  EXPECT_EQ(a.lr_scheduler_kwargs.min_lr_rate, 0.1);
  EXPECT_NO_THROW(check(a));
  TrainingArguments back;
  apply_json(back, nlohmann::json::parse(to_json(a).dump()), "round trip");
  EXPECT_EQ(back.lr_scheduler_kwargs.min_lr_rate, 0.1);
  EXPECT_EQ(to_json(TrainingArguments{})["lr_scheduler_kwargs"].dump(), "{}");
  const auto refused = [](const std::vector<std::string>& flags, const std::string& part) {
    TrainingArguments b;
    const std::string m = error_of([&] {
      apply_flags(b, flags);
      check(b);
    });
    EXPECT_TRUE(contains(m, part)) << m;
  };
  refused({"--lr_scheduler_type", "cosine_with_min_lr"}, "cosine_with_min_lr needs lr_scheduler_kwargs");
  refused({"--lr_scheduler_kwargs", R"({"min_lr_rate": 0.1})"}, "min_lr_rate is cosine_with_min_lr's, not linear's");
  refused({"--lr_scheduler_type", "cosine_with_min_lr", "--lr_scheduler_kwargs", R"({"min_lr_rate": 2})"},
          "min_lr_rate: must be in [0, 1], got 2");
  refused({"--lr_scheduler_kwargs", R"({"min_lr": 1e-4})"}, "unknown key 'min_lr' (known: min_lr_rate)");
  refused({"--lr_scheduler_kwargs", "0.1"}, "is not an object such as");
}

TEST(TrainingArguments, UnknownNamesAndBadValuesAreErrorsNamingThem) {
  TrainingArguments a;
  std::string message = error_of([&] { apply_flags(a, {"--learnin_rate", "1e-3"}); });
  EXPECT_TRUE(contains(message, "unknown flag --learnin_rate: not a training argument")) << message;
  EXPECT_TRUE(contains(message, "learning_rate")) << message;  // the known names are listed
  message = error_of([&] { apply_flags(a, {"--max_steps", "ten"}); });
  EXPECT_TRUE(contains(message, "max_steps: 'ten' is not an integer")) << message;
  message = error_of([&] { apply_json(a, nlohmann::json::parse(R"({"seed": -1})"), "args.json"); });
  EXPECT_TRUE(contains(message, "seed: '-1' is not a non-negative integer")) << message;
  message = error_of([&] { apply_json(a, nlohmann::json::parse(R"({"gradient_checkpointing": "yes"})"), "f"); });
  EXPECT_TRUE(contains(message, "is not a bool")) << message;
  message = error_of([&] {
    apply_json(a, nlohmann::json::parse(R"({"evaluation_strategy": "epoch", "eval_strategy": "steps"})"), "f");
  });
  EXPECT_TRUE(contains(message, "'eval_strategy' and 'evaluation_strategy' are the same training argument")) << message;
  message = error_of([&] { apply_flags(a, {"--learning_rate"}); });
  EXPECT_TRUE(contains(message, "--learning_rate needs a value")) << message;
  message = error_of([&] { apply_flags(a, {"--output_dir", "--overwrite_output_dir"}); });
  EXPECT_TRUE(contains(message, "--output_dir needs a value, not the flag --overwrite_output_dir")) << message;
  apply_flags(a, {"--greater_is_better", "--warmup_steps", "-0"});  // a bare optional bool; a value with one dash
  EXPECT_EQ(a.greater_is_better, true);
  EXPECT_EQ(a.warmup_steps, 0);
  const auto refused = [](auto edit, const std::string& part) {
    TrainingArguments b;
    edit(b);
    const std::string m = error_of([&] { check(b); });
    EXPECT_TRUE(contains(m, part)) << m;
  };
  refused([](TrainingArguments& b) { b.eval_strategy = "daily"; }, "eval_strategy: 'daily' is not one of no, steps, epoch");
  refused([](TrainingArguments& b) { b.learning_rate = 0; }, "learning_rate: must be more than 0, got 0");
  refused([](TrainingArguments& b) { b.max_steps = 0; }, "max_steps: must be more than 0, or -1");
  refused([](TrainingArguments& b) { b.lr_scheduler_type = "step"; }, "lr_scheduler_type: 'step' is not one of");
  refused([](TrainingArguments& b) { b.load_best_model_at_end = true; }, "load_best_model_at_end: needs eval_strategy");
  refused([](TrainingArguments& b) {
    b.gradient_checkpointing = true;
    b.gradient_checkpointing_kwargs = {.policy = "blocks", .budget = 1 << 20};
  }, "policy blocks takes no budget");
  refused([](TrainingArguments& b) {
    b.gradient_checkpointing = true;
    b.gradient_checkpointing_kwargs.policy = "magic";
  }, "magic");
}

// Note [One value per setting]: one argument given two values, in one
// spelling or two, is an error naming both flags and both values; the same
// value twice (3e-3 and 0.003 are one number) is not.
TEST(TrainingArguments, OneArgumentGivenTwoValuesIsAnErrorNamingBoth) {
  TrainingArguments a;
  std::string message = error_of([&] { apply_flags(a, {"--learning_rate", "1", "--learning-rate", "2"}); });
  EXPECT_TRUE(contains(message, "--learning_rate 1 and --learning-rate 2 give training argument learning_rate two "
                                "values (1.0 and 2.0)")) << message;
  message = error_of([&] { apply_flags(a, {"--max-steps", "4", "--max_steps=6"}); });
  EXPECT_TRUE(contains(message, "--max-steps 4 and --max_steps=6 give training argument max_steps")) << message;
  message = error_of([&] { apply_flags(a, {"--tf32", "--tf32=false"}); });
  EXPECT_TRUE(contains(message, "--tf32 and --tf32=false give training argument tf32")) << message;
  message = error_of([&] { apply_flags(a, {"--evaluation_strategy", "epoch", "--eval-strategy", "steps"}); });
  EXPECT_TRUE(contains(message, "--evaluation_strategy epoch and --eval-strategy steps")) << message;
  TrainingArguments b;
  apply_flags(b, {"--learning_rate", "3e-3", "--learning-rate", "0.003", "--seed", "4", "--seed=4"});
  EXPECT_EQ(b.learning_rate, 3e-3);
  EXPECT_EQ(flag_giving({"--seed", "4", "--learning-rate=0.1"}, "learning_rate"), "--learning-rate=0.1");
  EXPECT_EQ(flag_giving({"--seed", "4"}, "learning_rate"), std::nullopt);
}

// A task's flag (--lr) and a trainer flag (--learning-rate) of one
// argument: the same value passes, another is an error naming both.
TEST(TrainingArguments, ATaskFlagAndATrainerFlagOfOneArgumentMustAgree) {
  TrainingArguments task;
  task.learning_rate = 3e-3;
  const std::string message = error_of([&] { check_one_value(task, "--lr", "learning_rate", {"--learning-rate", "1e-3"}); });
  EXPECT_TRUE(contains(message, "--lr 0.003 and --learning-rate 1e-3 give training argument learning_rate two values "
                                "(0.003 and 0.001)")) << message;
  check_one_value(task, "--lr", "learning_rate", {"--learning_rate=3e-3", "--seed", "2"});  // the same value
  check_one_value(task, "--lr", "learning_rate", {"--seed", "2"});                          // not given there
}

}  // namespace
}  // namespace remat::train
