// The kjv-gpt task on a small synthetic text (the real run is the README's
// main job): the loss falls, the curve has one point per eval interval, and
// the sample continues the prompt. A careless user's run: bad options and
// outputs found before the first step, paths that collide, an output folder
// in use or holding checkpoints, a diverging loss.
#include "tasks/kjv_gpt_task.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "engine/error.h"
#include "nn/safetensors.h"
#include "scheduler/plan.h"
#include "scheduler/profile_json.h"
#include "train/run_files.h"
#include "tests/support/errors.h"
#include "tests/support/files.h"

namespace remat::tasks {

using namespace remat::train;  // the Trainer, its arguments and its checks
namespace {

using testing::write_text;

KjvGptOptions tiny_options(const std::string& path) {
  return {.n_layer = 1, .n_head = 2, .n_embd = 16, .block_size = 16, .batch_size = 8, .max_steps = 80,
          .time_limit_seconds = 0, .lr = 1e-2, .warmup_steps = 10, .eval_interval = 40, .eval_batches = 2,
          .sample_chars = 20, .prompt = "ab", .text_path = path, .threads = 1};
}

TEST(KjvGptTask, LearnsARepeatingText) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "abcd efg\n";
  const KjvResult result = train_kjv_gpt(tiny_options(write_text("remat_kjv_task_test.txt", text)));
  ASSERT_EQ(result.curve.size(), 2u);
  EXPECT_EQ(result.curve[1].step, 80);
  EXPECT_EQ(result.vocab_size, 9);  // a-g, space, newline
  // Uniform guessing is log 9 = 2.2 nats; the pattern is almost deterministic.
  EXPECT_LT(result.curve[1].val_loss, 0.5);
  EXPECT_LT(result.curve[1].val_loss, result.curve[0].val_loss + 1e-9);
  EXPECT_GT(result.curve[1].peak_activation_bytes, 0);
  EXPECT_EQ(result.sample.size(), 2u + 20u);
  EXPECT_EQ(result.sample.substr(0, 2), "ab");
}

// A last step off the interval is evaluated too, before its checkpoint is
// saved (so the saved state holds that evaluation).
TEST(KjvGptTask, TheLastStepIsEvaluatedBeforeItIsSaved) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "abcd efg\n";
  KjvGptOptions options = tiny_options(write_text("remat_kjv_task_last.txt", text));
  options.max_steps = 6;
  options.eval_interval = 4;
  const std::string dir = (std::filesystem::temp_directory_path() / "remat_kjv_last").string();
  std::filesystem::remove_all(dir);
  options.trainer_flags = {"--output-dir", dir};
  const KjvResult result = train_kjv_gpt(options);
  ASSERT_EQ(result.curve.size(), 2u);
  EXPECT_EQ(result.curve[0].step, 4);
  EXPECT_EQ(result.curve[1].step, 6);
  std::ifstream state(dir + "/checkpoint-6/trainer_state.json");
  const std::string saved((std::istreambuf_iterator<char>(state)), std::istreambuf_iterator<char>());
  EXPECT_NE(saved.find(fmt::format("\"eval_loss\": {}", result.curve[1].val_loss)), std::string::npos) << saved;
}

// Issue 43, items 8 and 9: resuming a finished run (or at max_steps below
// its step) printed a row of train_loss 0.0000 and lr 0, and appended
// train_loss 0.0 and a second evaluation of the same step to
// trainer_state.json. Now: no row, nothing appended.
TEST(KjvGptTask, AResumeWithNothingToTrainWritesNoRow) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "abcd efg\n";
  KjvGptOptions options = tiny_options(write_text("remat_kjv_task_nothing.txt", text));
  options.max_steps = 6;
  options.eval_interval = 2;
  const std::string dir = (std::filesystem::temp_directory_path() / "remat_kjv_nothing").string();
  std::filesystem::remove_all(dir);
  options.trainer_flags = {"--output-dir", dir};
  train_kjv_gpt(options);
  const auto state = [&] {
    std::ifstream in(dir + "/trainer_state.json");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string before = state();
  options.trainer_flags = {"--output-dir", dir, "--resume-from-checkpoint", "latest"};
  for (const int64_t steps : {6, 4}) {
    options.max_steps = steps;
    ::testing::internal::CaptureStderr();
    const KjvResult result = train_kjv_gpt(options);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(result.curve.empty()) << "a row: step " << result.curve[0].step;
    EXPECT_EQ(result.first_step, 6);
    EXPECT_NE(err.find(fmt::format("nothing to train: the checkpoint is at step 6, max_steps is {}", steps)),
              std::string::npos) << err;
  }
  EXPECT_EQ(state(), before);
}

TEST(KjvGptTask, CheckpointingChangesMemoryNotTheCurve) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "abcd efg\n";
  KjvGptOptions options = tiny_options(write_text("remat_kjv_task_test5.txt", text));
  options.n_layer = 2;
  options.dropout = 0.1;
  options.max_steps = 20;
  options.eval_interval = 10;
  const KjvResult plain = train_kjv_gpt(options);
  options.checkpointing = "blocks";
  const KjvResult checkpointed = train_kjv_gpt(options);
  ASSERT_EQ(plain.curve.size(), checkpointed.curve.size());
  for (size_t i = 0; i < plain.curve.size(); ++i) {
    EXPECT_EQ(plain.curve[i].train_loss, checkpointed.curve[i].train_loss);  // bit for bit, dropout included
    EXPECT_EQ(plain.curve[i].val_loss, checkpointed.curve[i].val_loss);
  }
  EXPECT_LT(checkpointed.curve.back().peak_activation_bytes, plain.curve.back().peak_activation_bytes);
  EXPECT_EQ(plain.sample, checkpointed.sample);
}

// The log's peak is the steady state's, the first step's apart: under cost
// with a budget of keep-all's peak, every row's peak keeps to the budget,
// and so does the first step, planned from a rehearsal. (Before: one peak
// column, the profiling step's, which ran under blocks and on one layer
// peaked above keep-all.)
TEST(KjvGptTask, TheLogReportsTheFirstStepsPeakApart) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "abcd efg\n";
  KjvGptOptions options = tiny_options(write_text("remat_kjv_task_test6.txt", text));
  options.max_steps = 12;
  options.eval_interval = 4;
  const KjvResult plain = train_kjv_gpt(options);
  const int64_t budget = plain.curve.back().peak_activation_bytes;
  options.checkpointing = "cost";
  options.checkpointing_budget = budget;
  const KjvResult checkpointed = train_kjv_gpt(options);
  ASSERT_EQ(checkpointed.curve.size(), 3u);
  for (const KjvEval& eval : checkpointed.curve) {
    EXPECT_GT(eval.peak_activation_bytes, 0) << "step " << eval.step;
    EXPECT_LE(eval.peak_activation_bytes, budget) << "step " << eval.step;
    EXPECT_EQ(eval.first_step_peak_activation_bytes, checkpointed.curve[0].first_step_peak_activation_bytes);
  }
  EXPECT_GT(checkpointed.curve[0].first_step_peak_activation_bytes, 0);
  EXPECT_LE(checkpointed.curve[0].first_step_peak_activation_bytes, budget);
}

// Without a saved profile, the first step is planned from a rehearsal on
// the meta device: within a budget as tight as the graph allows from the
// first step, with the losses of a run that keeps everything; a budget
// below the minimum is refused before the first step.
TEST(KjvGptTask, ARehearsalKeepsTheFirstStepWithinTheBudget) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "abcd efg\n";
  KjvGptOptions options = tiny_options(write_text("remat_kjv_task_rehearsal.txt", text));
  const std::string profile = (std::filesystem::temp_directory_path() / "remat_kjv_rehearsal.json").string();
  std::filesystem::remove(profile);
  options.max_steps = 3;
  options.eval_interval = 1;
  const KjvResult plain = train_kjv_gpt(options);
  options.checkpointing = "cost";
  options.save_checkpointing_profile = profile;
  train_kjv_gpt(options);
  const int64_t budget = scheduler::minimum_budget(scheduler::load_profile(profile));
  options.save_checkpointing_profile.clear();

  options.checkpointing_budget = budget;
  const KjvResult result = train_kjv_gpt(options);
  ASSERT_EQ(result.curve.size(), 3u);
  EXPECT_GT(result.curve[0].first_step_peak_activation_bytes, 0);
  EXPECT_LE(result.curve[0].first_step_peak_activation_bytes, budget);
  for (size_t i = 0; i < result.curve.size(); ++i) {
    EXPECT_LE(result.curve[i].peak_activation_bytes, budget) << "step " << result.curve[i].step;
    EXPECT_EQ(result.curve[i].train_loss, plain.curve[i].train_loss) << "step " << result.curve[i].step;
  }

  options.checkpointing_budget = budget - 1;
  int evals = 0;
  try {
    train_kjv_gpt(options, [&](const KjvEval&) { ++evals; });
    ADD_FAILURE() << "a budget below the minimum trained";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("at least {} bytes", budget)), std::string::npos) << e.what();
  }
  EXPECT_EQ(evals, 0);
}

// With the profile an earlier run saved, the first step runs under the
// plan, and every step stays within a budget as tight as the graph allows.
TEST(KjvGptTask, ASavedProfileKeepsTheFirstStepWithinTheBudget) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "abcd efg\n";
  KjvGptOptions options = tiny_options(write_text("remat_kjv_task_profile.txt", text));
  const std::string profile = (std::filesystem::temp_directory_path() / "remat_kjv_profile.json").string();
  std::filesystem::remove(profile);
  options.max_steps = 3;
  options.eval_interval = 3;
  options.checkpointing = "cost";
  options.save_checkpointing_profile = profile;
  train_kjv_gpt(options);
  const int64_t budget = scheduler::minimum_budget(scheduler::load_profile(profile));

  options.save_checkpointing_profile.clear();
  options.checkpointing_profile = profile;
  options.checkpointing_budget = budget;
  options.eval_interval = 1;
  const KjvResult result = train_kjv_gpt(options);
  ASSERT_EQ(result.curve.size(), 3u);
  EXPECT_GT(result.curve[0].first_step_peak_activation_bytes, 0);
  EXPECT_LE(result.curve[0].first_step_peak_activation_bytes, budget);
  for (const KjvEval& eval : result.curve) EXPECT_LE(eval.peak_activation_bytes, budget) << "step " << eval.step;

  options.checkpointing_budget = budget - 1;  // below the graph's minimum: refused before the first step
  int evals = 0;
  try {
    train_kjv_gpt(options, [&](const KjvEval&) { ++evals; });
    ADD_FAILURE() << "a budget below the minimum trained";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("budget"), std::string::npos) << e.what();
  }
  EXPECT_EQ(evals, 0);
}

TEST(KjvGptTask, APromptOutsideTheVocabularyIsAnError) {
  KjvGptOptions options = tiny_options(write_text("remat_kjv_task_test2.txt", std::string(200, 'a') + "b"));
  options.max_steps = 1;
  options.prompt = std::string(1, 'z');  // (a string literal here trips a false GCC 12 -Wrestrict warning)
  EXPECT_THROW(train_kjv_gpt(options), Error);
}

std::string kjv_error(const KjvGptOptions& options, int* evals = nullptr) {
  try {
    train_kjv_gpt(options, [&](const KjvEval&) {
      if (evals) ++*evals;
    });
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

using testing::contains;

using testing::read_file;

std::string repeated_text(const std::string& name) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "abcd efg\n";
  return write_text(name, text);
}

// Found only after training ended (the trained weights lost): now before the
// first step, with a message naming the flag.
TEST(KjvGptTask, BadSamplingAndOutputsAreFoundBeforeTheFirstStep) {
  KjvGptOptions options = tiny_options(repeated_text("remat_kjv_task_early.txt"));
  options.max_steps = 2;
  options.eval_interval = 1;
  const auto expect_early = [](const KjvGptOptions& o, const std::string& part) {
    int evals = 0;
    const std::string message = kjv_error(o, &evals);
    EXPECT_TRUE(contains(message, part)) << message;
    EXPECT_EQ(evals, 0) << "trained before finding: " << message;
  };
  KjvGptOptions o = options;
  o.prompt = std::string(1, 'z');
  expect_early(o, "--prompt 'z'");
  o = options;
  o.temperature = 0;
  expect_early(o, "--temperature must be > 0");
  o = options;
  o.prompt.clear();
  expect_early(o, "--prompt must not be empty");
  o = options;
  o.weights_path = "/nonexistent/remat/w.safetensors";
  expect_early(o, "its folder '/nonexistent/remat' does not exist");
  o = options;
  o.weights_path = "/proc/remat_w.safetensors";  // read-only, root included
  expect_early(o, "cannot write in its folder '/proc'");
  o = options;
  o.trainer_flags = {"--output-dir", o.text_path};  // a file
  expect_early(o, "output_dir '" + o.text_path + "' cannot be made");
  o = options;
  o.trainer_flags = {"--resume-from-checkpoint", "/nonexistent/remat/checkpoint-5"};
  expect_early(o, "'/nonexistent/remat/checkpoint-5' does not exist");
}

TEST(KjvGptTask, NumbersOutOfRangeAreErrors) {
  const KjvGptOptions options = tiny_options(repeated_text("remat_kjv_task_ranges.txt"));
  const auto expect_error = [&](KjvGptOptions o, const std::string& part) {
    o.max_steps = 1;
    const std::string message = kjv_error(o);
    EXPECT_TRUE(contains(message, part)) << message;
  };
  KjvGptOptions o = options;
  o.time_limit_seconds = -1;
  expect_error(o, "--time-limit must be 0 (none) or more seconds, got -1");
  o = options;
  o.sample_chars = -5;
  expect_error(o, "--sample-chars must be >= 0, got -5");
  o = options;
  o.checkpointing_budget = 1 << 20;
  expect_error(o, "--checkpointing-budget needs --checkpointing");
  o = options;
  o.lr = 0;
  expect_error(o, "--lr must be > 0, got 0");
  o = options;
  o.threads = 100000;
  expect_error(o, "--threads must be between 1 and");
}

// Note [One value per setting] (train/training_arguments.cpp): every flag
// of the task that gives a training argument, given with a trainer flag
// that gives the argument another value, is an error naming both, before
// anything runs; the same value in both is not.
TEST(KjvGptTask, EveryTaskFlagAndATrainerFlagOfItsArgumentMustAgree) {
  const KjvGptOptions options = tiny_options(repeated_text("remat_kjv_task_flags.txt"));
  const std::map<std::string_view, std::string> other{
      {"max_steps", "7"}, {"per_device_train_batch_size", "5"}, {"learning_rate", "0.5"}, {"weight_decay", "0.5"},
      {"warmup_steps", "3"}, {"eval_steps", "3"}, {"gradient_accumulation_steps", "3"}, {"local_sgd_steps", "3"},
      {"diloco", "true"}, {"outer_lr", "0.5"}, {"outer_momentum", "0.5"}, {"seed", "9"}, {"max_time", "9"},
      {"device", "meta"}, {"gradient_checkpointing_kwargs", R"({"policy": "sqrt"})"}};
  ASSERT_EQ(task_flags(options).size(), other.size());
  for (const TaskFlag<KjvGptOptions>& row : task_flags(options)) {
    SCOPED_TRACE(std::string(row.flag));
    KjvGptOptions o = options;
    o.checkpointing = "cost";
    o.flags_given = {std::string(row.flag)};
    const std::string trainer_flag = fmt::format("--{}={}", row.argument, other.at(row.argument));
    o.trainer_flags = {trainer_flag};
    const std::string message = kjv_error(o);
    EXPECT_TRUE(contains(message, std::string(row.flag) + " ")) << message;
    EXPECT_TRUE(contains(message, " and " + trainer_flag + " give training argument " + std::string(row.argument)))
        << message;
  }
  KjvGptOptions o = options;
  o.lr = 3e-3;
  o.flags_given = {"--lr", "--max-steps"};
  o.trainer_flags = {"--learning-rate", "0.003", "--max_steps", "80"};
  check_options(o);
  // Without the task's flag given, the trainer flag sets the argument.
  o.flags_given.clear();
  o.trainer_flags = {"--learning-rate", "1e-3"};
  EXPECT_EQ(trainer_arguments(o).learning_rate, 1e-3);
}

// The header is made from the arguments the run trains with, so it shows a
// trainer flag's value where only the trainer flag gave it.
TEST(KjvGptTask, TheHeaderShowsTheArgumentsTheRunTrainsWith) {
  KjvGptOptions o = tiny_options("unused.txt");
  o.batch_size = 4;
  std::string header = run_header(o, trainer_arguments(o));
  EXPECT_TRUE(contains(header, "batch 4 per rank, AdamW lr 0.01, 80 steps, 1 threads; 1 process")) << header;
  o.trainer_flags = {"--learning-rate", "1e-3", "--max_steps", "6", "--per-device-train-batch-size", "8",
                     "--gradient-accumulation-steps", "2"};
  header = run_header(o, trainer_arguments(o));
  EXPECT_TRUE(contains(header, "task kjv-gpt: GPT 1 layers x 16 channels, 2 heads, context 16, tied head, batch 8 "
                               "per rank, AdamW lr 0.001, 6 steps, 1 threads; 1 process, 2 micro-batches per step"))
      << header;
}

// Nothing accepted silently: an empty policy name, a dtr budget below the
// floor no eviction goes under, a profile saved from another model.
TEST(KjvGptTask, AnEmptyPolicyATooSmallDtrBudgetAndAnotherModelsProfileAreErrors) {
  const KjvGptOptions options = tiny_options(repeated_text("remat_kjv_task_silent.txt"));
  KjvGptOptions o = options;
  o.flags_given = {"--checkpointing"};
  std::string message = kjv_error(o);
  EXPECT_TRUE(contains(message, "--checkpointing '' names no policy; give one of")) << message;
  o = options;
  o.max_steps = 2;
  o.checkpointing = "dtr";
  o.checkpointing_budget = 1;
  message = kjv_error(o);
  EXPECT_TRUE(contains(message, "policy dtr's budget of 1 bytes (0.00 MiB) cannot hold this step")) << message;
  EXPECT_TRUE(contains(message, "give a budget of at least")) << message;
  // A profile of a 2-layer model, run on 1 layer.
  const std::string profile = (std::filesystem::temp_directory_path() / "remat_kjv_other_profile.json").string();
  std::filesystem::remove(profile);
  o = options;
  o.n_layer = 2;
  o.max_steps = 2;
  o.eval_interval = 2;
  o.checkpointing = "cost";
  o.save_checkpointing_profile = profile;
  ASSERT_EQ(kjv_error(o), "no error");
  o.n_layer = 1;
  o.save_checkpointing_profile.clear();
  o.checkpointing_profile = profile;
  int evals = 0;
  message = kjv_error(o, &evals);
  EXPECT_TRUE(contains(message, "the saved profile planned from is of another graph")) << message;
  EXPECT_TRUE(contains(message, "the profile's graph has signature")) << message;
  EXPECT_EQ(evals, 0);  // refused before the first step
}

// Tokens per second count the rows the steps ran: an epoch's last batch is
// smaller than the others (30 blocks in batches of 7: 7, 7, 7, 7, 2).
TEST(KjvGptTask, TokensPerSecondCountTheRowsThatRan) {
  std::string text;
  for (int i = 0; i < 60; ++i) text += "abcd efg\n";
  KjvGptOptions options = tiny_options(write_text("remat_kjv_task_rows.txt", text));
  options.batch_size = 7;
  options.eval_batches = 1;
  std::vector<StepStats> steps;
  const auto on_step = [&](const StepStats& step) { steps.push_back(step); };
  options.max_steps = 20;  // over several epochs
  options.eval_interval = 20;
  const KjvResult result = train_kjv_gpt(options, {}, on_step);
  int64_t samples = 0;
  bool partial = false;
  for (const StepStats& step : steps) {
    samples += step.samples;
    partial = partial || step.samples < 7;
    EXPECT_EQ(step.batch_size, 7);
  }
  EXPECT_TRUE(partial) << "no epoch ended in a smaller batch";
  EXPECT_LT(samples, 20 * 7);
  ASSERT_EQ(result.curve.size(), 1u);
  const KjvEval& eval = result.curve[0];
  EXPECT_NEAR(eval.tokens_per_second * eval.seconds, static_cast<double>(samples * 16), 1e-6 * samples * 16);
}

TEST(KjvGptTask, PathsThatCollideAreRefused) {
  const std::string text_path = repeated_text("remat_kjv_task_collide.txt");
  const std::string text = read_file(text_path);
  KjvGptOptions options = tiny_options(text_path);
  options.max_steps = 2;
  options.weights_path = text_path;
  EXPECT_TRUE(contains(kjv_error(options), "--save-weights '" + text_path + "' and --text '" + text_path + "'"));
  EXPECT_TRUE(read_file(text_path) == text) << "the training text was overwritten";
  options.weights_path = (std::filesystem::temp_directory_path() / "remat_kjv_collide.safetensors").string();
  options.checkpointing = "blocks";
  options.save_checkpointing_profile = options.weights_path;
  std::filesystem::remove(options.weights_path);
  EXPECT_TRUE(contains(kjv_error(options), "and --save-checkpointing-profile"));
  EXPECT_FALSE(std::filesystem::exists(options.weights_path));
}

using testing::temp_folder;

TEST(KjvGptTask, AnOutputFolderWithCheckpointsIsReplacedOnlyWhenAskedTo) {
  KjvGptOptions options = tiny_options(repeated_text("remat_kjv_task_existing.txt"));
  options.max_steps = 2;
  options.eval_interval = 2;
  const std::string dir = temp_folder("remat_kjv_existing");
  const std::string file = dir + "/checkpoint-2/checkpoint.safetensors";
  options.trainer_flags = {"--output-dir", dir};
  EXPECT_EQ(kjv_error(options), "no error");
  const std::string first = read_file(file);
  options.seed = 1;  // another run
  EXPECT_TRUE(contains(kjv_error(options), "already holds checkpoints; give resume_from_checkpoint to continue, or "
                                          "overwrite_output_dir"));
  EXPECT_TRUE(read_file(file) == first) << "the checkpoint was overwritten";
  options.trainer_flags.push_back("--overwrite-output-dir");
  EXPECT_EQ(kjv_error(options), "no error");
  EXPECT_FALSE(read_file(file) == first) << "the checkpoint was not replaced";
}

// Two runs given one output folder would write one checkpoint; the second
// stops at its start, naming the folder and the process that holds it.
TEST(KjvGptTask, AnOutputFolderInUseByAnotherRunIsAnError) {
  KjvGptOptions options = tiny_options(repeated_text("remat_kjv_task_locked.txt"));
  options.max_steps = 2;
  const std::string dir = temp_folder("remat_kjv_locked");
  std::filesystem::create_directories(dir);
  options.trainer_flags = {"--output-dir", dir};
  // The other run's lock, as it takes it: flock on DIR/trainer.lock, its pid inside.
  const std::string lock_path = dir + "/trainer.lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  ASSERT_EQ(::write(fd, "4242\n", 5), 5);
  int evals = 0;
  const std::string message = kjv_error(options, &evals);
  EXPECT_TRUE(contains(message, "is in use by another run (process 4242")) << message;
  EXPECT_TRUE(contains(message, "output_dir '" + dir + "' is in use")) << message;  // the folder given, not DIR/trainer
  EXPECT_EQ(evals, 0);
  EXPECT_FALSE(std::filesystem::exists(dir + "/checkpoint-2"));
  ::unlink(lock_path.c_str());
  ::close(fd);
  EXPECT_EQ(kjv_error(options), "no error");  // free once the other run is gone
  EXPECT_TRUE(std::filesystem::exists(dir + "/checkpoint-2"));
  EXPECT_FALSE(std::filesystem::exists(lock_path));
}

// --lr 1e30 printed -nan for every step, exited 0 and overwrote a good
// checkpoint with NaN weights.
TEST(KjvGptTask, ANonFiniteLossStopsTheRunAndLeavesTheCheckpoint) {
  KjvGptOptions options = tiny_options(repeated_text("remat_kjv_task_nan.txt"));
  options.max_steps = 2;
  options.eval_interval = 2;
  const std::string dir = temp_folder("remat_kjv_nan");
  const std::string file = dir + "/checkpoint-2/checkpoint.safetensors";
  options.trainer_flags = {"--output-dir", dir};
  train_kjv_gpt(options);
  const std::string good = read_file(file);
  options.trainer_flags = {"--output-dir", dir, "--resume-from-checkpoint", "latest"};
  options.max_steps = 10;
  options.eval_interval = 1;
  options.lr = 1e30;
  int evals = 0;
  const std::string message = kjv_error(options, &evals);
  EXPECT_TRUE(contains(message, "Trainer: step ")) << message;
  EXPECT_TRUE(contains(message, "so training stopped (its newest checkpoint, '" + dir + "/checkpoint-2', is left "
                                "as it was)")) << message;
  EXPECT_TRUE(read_file(file) == good) << "the checkpoint was overwritten";
  EXPECT_FALSE(std::filesystem::exists(dir + "/checkpoint-3")) << "a checkpoint of diverged weights was written";
  EXPECT_EQ(evals, 0);
}

TEST(KjvGptTask, SavesAHuggingFaceFolderAndStartsFromOne) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "abcd efg\n";
  KjvGptOptions options = tiny_options(write_text("remat_kjv_task_test4.txt", text));
  options.max_steps = 4;
  options.eval_interval = 4;
  options.weights_path = (std::filesystem::temp_directory_path() / "remat_kjv_weights").string();
  std::filesystem::remove_all(options.weights_path);
  const KjvResult trained = train_kjv_gpt(options);
  const std::string file = options.weights_path + "/model.safetensors";
  const auto tensors = nn::read_safetensors(file);
  EXPECT_EQ(tensors.front().first, "transformer.wte.weight");
  EXPECT_EQ(tensors.front().second.shape(), (Shape{9, 16}));
  const auto metadata = nn::read_safetensors_metadata(file);
  EXPECT_EQ(metadata.at("symbols"), "\n abcdefg");
  EXPECT_EQ(metadata.at("steps"), "4");
  EXPECT_TRUE(std::filesystem::exists(options.weights_path + "/config.json"));

  // Started from that folder, with a step too small to move the weights:
  // the validation loss of the trained model, not of a fresh one.
  KjvGptOptions resumed = options;
  resumed.init_from = options.weights_path;
  resumed.weights_path.clear();
  resumed.n_layer = 3;  // not used: the folder's configuration is
  resumed.max_steps = 1;
  resumed.lr = 1e-12;
  resumed.warmup_steps = 0;
  const KjvResult started = train_kjv_gpt(resumed);
  ASSERT_EQ(started.curve.size(), 1u);
  EXPECT_EQ(started.parameters, trained.parameters);
  EXPECT_NEAR(started.curve[0].val_loss, trained.curve.back().val_loss, 1e-5);
  // Another text's symbols would give its ids other characters.
  std::string other;
  for (int i = 0; i < 100; ++i) other += "abcd efgz";
  resumed.text_path = write_text("remat_kjv_task_test4b.txt", other);
  const std::string message = kjv_error(resumed);
  EXPECT_TRUE(contains(message, "was trained on other symbols than this text's")) << message;
}

TEST(KjvGptTask, BadOptionsAreErrors) {
  KjvGptOptions options = tiny_options(write_text("remat_kjv_task_test3.txt", std::string(200, 'a')));
  options.max_steps = 0;
  EXPECT_THROW(train_kjv_gpt(options), Error);
}

// ---- The run's files (issue 43, item 9 and deliverable 6) ----

// Two runs writing one --save-weights folder: the second stops at its start,
// naming the flag and the folder.
TEST(KjvGptTask, AWeightsFolderInUseByAnotherRunIsAnError) {
  KjvGptOptions options = tiny_options(repeated_text("remat_kjv_task_weights_locked.txt"));
  options.max_steps = 2;
  options.weights_path = temp_folder("remat_kjv_weights_locked");
  {
    const RunLock other(options.weights_path, "--save-weights");  // the other run's
    int evals = 0;
    const std::string message = kjv_error(options, &evals);
    EXPECT_TRUE(contains(message, "--save-weights '" + options.weights_path + "' is in use by another run"))
        << message;
    EXPECT_EQ(evals, 0);
    EXPECT_FALSE(std::filesystem::exists(options.weights_path));
  }
  EXPECT_EQ(kjv_error(options), "no error");  // free once the other run is gone
  EXPECT_TRUE(std::filesystem::exists(options.weights_path + "/model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(options.weights_path + ".lock"));
}

// Weights that cannot fit their disk: found before training (where the test
// may mount a small tmpfs: as root), not after it.
TEST(KjvGptTask, WeightsWithoutRoomAreFoundBeforeTraining) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  const std::string disk = temp_folder("remat_kjv_small_disk");
  std::filesystem::create_directories(disk);
  if (::mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=16k") != 0) {
    GTEST_SKIP() << "mount -t tmpfs -o size=16k failed: a container without CAP_SYS_ADMIN";
  }
  struct Unmount {
    const std::string& at;
    ~Unmount() { ::umount(at.c_str()); }
  } unmount{disk};
  KjvGptOptions options = tiny_options(repeated_text("remat_kjv_task_small_disk.txt"));
  options.max_steps = 2;
  options.weights_path = disk + "/weights";  // about 15 KiB of weights, 16 KiB less the lock's page free
  int evals = 0;
  const std::string message = kjv_error(options, &evals);
  EXPECT_TRUE(contains(message, "--save-weights '" + options.weights_path + "': its folder '" + disk + "' has "))
      << message;
  EXPECT_TRUE(contains(message, " bytes free, and the run would write ")) << message;
  EXPECT_TRUE(contains(message, " bytes there; free some space or give another folder")) << message;
  EXPECT_EQ(evals, 0) << "trained before finding: " << message;
}

// A weights save that fails after training says where the trained weights
// still are (the last step's checkpoint), and the command it names writes
// them without training again; the profile asked for is saved all the same.
TEST(KjvGptTask, AWeightsSaveThatFailsSaysWhereTheWeightsAre) {
  KjvGptOptions options = tiny_options(repeated_text("remat_kjv_task_weights_fail.txt"));
  options.max_steps = 2;
  options.eval_interval = 2;
  const std::string dir = temp_folder("remat_kjv_weights_fail");
  options.weights_path = temp_folder("remat_kjv_weights_fail_w");
  options.checkpointing = "blocks";
  options.save_checkpointing_profile = temp_folder("remat_kjv_weights_fail.json");
  options.trainer_flags = {"--output-dir", dir};
  ::setenv("REMAT_FAULT_WRITE", "ENOSPC:remat_kjv_weights_fail_w/model.safetensors:100", 1);
  int evals = 0;
  std::string message = kjv_error(options, &evals);
  ::unsetenv("REMAT_FAULT_WRITE");
  EXPECT_EQ(evals, 1);  // it trained
  EXPECT_TRUE(contains(message, "--save-weights '" + options.weights_path + "' was not written")) << message;
  EXPECT_TRUE(contains(message, "No space left on device (ENOSPC)")) << message;
  EXPECT_TRUE(contains(message, "the trained weights are in the checkpoint '" + dir + "/checkpoint-2'")) << message;
  EXPECT_FALSE(std::filesystem::exists(options.weights_path + "/model.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(options.save_checkpointing_profile)) << "the profile was not saved";
  options.trainer_flags = {"--output-dir", dir, "--resume-from-checkpoint", dir + "/checkpoint-2"};
  EXPECT_EQ(kjv_error(options), "no error");
  EXPECT_EQ(nn::read_safetensors_metadata(options.weights_path + "/model.safetensors").at("steps"), "2");
  // Without --output-dir, nothing kept them; the message says so.
  options.trainer_flags = {};
  ::setenv("REMAT_FAULT_WRITE", "ENOSPC:remat_kjv_weights_fail_w/model.safetensors", 1);
  message = kjv_error(options);
  ::unsetenv("REMAT_FAULT_WRITE");
  EXPECT_TRUE(contains(message, "the trained weights were not saved anywhere else")) << message;
}

// An empty --text reached the tokenizer, whose error could not name it.
TEST(KjvGptTask, AnEmptyTextIsAnErrorNamingTheFile) {
  const std::string path = write_text("remat_kjv_task_empty.txt", "");
  const std::string message = kjv_error(tiny_options(path));
  EXPECT_TRUE(contains(message, "text file '" + path + "' is empty")) << message;
}

}  // namespace
}  // namespace remat::tasks
