// Stopping on a signal (train/interrupt.h): the scope notes the first
// SIGINT or SIGTERM and gives the previous handlers back; a second signal
// ends the process; a Trainer told by a signal stops after its step, saves
// there, and throws Interrupted. The program's side (exit codes 130 and
// 143, the message, a resume) is tests/tools/interrupt_cli_test.cpp.
#include "train/interrupt.h"

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>

#include "engine/factory.h"
#include "nn/mlp.h"
#include "tests/support/errors.h"
#include "train/trainer.h"

namespace remat::train {
namespace {

namespace fs = std::filesystem;
using testing::contains;

extern "C" void count_signal(int) {}

TEST(Interrupt, TheFirstSignalIsNotedAndThePreviousHandlerComesBack) {
  struct sigaction mine {}, before {}, after {};
  mine.sa_handler = &count_signal;
  sigemptyset(&mine.sa_mask);
  sigaction(SIGTERM, &mine, &before);
  EXPECT_EQ(pending_stop_signal(), 0);
  {
    InterruptScope scope;
    EXPECT_EQ(pending_stop_signal(), 0);
    raise(SIGTERM);  // only noted: the test goes on
    EXPECT_EQ(pending_stop_signal(), SIGTERM);
    EXPECT_THROW(InterruptScope(), Error);  // one at a time
  }
  EXPECT_EQ(pending_stop_signal(), 0);
  sigaction(SIGTERM, &before, &after);
  EXPECT_EQ(after.sa_handler, &count_signal);
}

TEST(Interrupt, ASecondSignalEndsTheProcessAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        InterruptScope scope;
        raise(SIGINT);
        raise(SIGINT);
        std::exit(0);  // not reached
      },
      ::testing::KilledBySignal(SIGINT), "SIGINT: stopping after this optimizer step");
}

TEST(Interrupt, TheExitCodeIsTheShellsForTheSignal) {
  const Interrupted by_int(SIGINT, 7, "out/checkpoint-7", "out");
  EXPECT_EQ(by_int.exit_code(), 130);
  EXPECT_TRUE(contains(by_int.what(), "SIGINT after step 7; saved checkpoint 'out/checkpoint-7'")) << by_int.what();
  const Interrupted by_term(SIGTERM, 3, "", "");
  EXPECT_EQ(by_term.exit_code(), 143);
  EXPECT_TRUE(contains(by_term.what(), "SIGTERM after step 3; no checkpoint saved (no output_dir)")) << by_term.what();
}

// A Trainer that gets SIGINT during step 3 ends that step, saves it, and
// throws; the next run resumes there.
TEST(Interrupt, ATrainerStopsAfterTheStepSavesItAndThrows) {
  Generator g(1);
  const data::Dataset data{normal({64, 4}, 0, 1, DType::Float32, g), from_vector(std::vector<int64_t>(64, 1), {64})};
  const fs::path dir = fs::temp_directory_path() / "remat_interrupt_test";
  fs::remove_all(dir);
  TrainingArguments args;
  args.output_dir = dir.string();
  args.per_device_train_batch_size = 4;
  args.max_steps = 10;
  args.save_steps = 100;
  args.logging_steps = 100;
  args.eval_strategy = "no";
  nn::MLP model({4, 8, 2}, g);
  int64_t steps_seen = 0;
  TrainerCallbacks callbacks{.on_step_end = [&](const StepStats& step) {
    steps_seen = step.step;
    if (step.step == 3) raise(SIGINT);
  }};
  {
    InterruptScope scope;
    Trainer trainer(model, args, data, nullptr, {}, classifier_forward(), callbacks);
    try {
      trainer.train();
      FAIL() << "train() returned after SIGINT";
    } catch (const Interrupted& e) {
      EXPECT_EQ(e.signal(), SIGINT);
      EXPECT_EQ(e.step(), 3);
      EXPECT_EQ(e.checkpoint(), (dir / "checkpoint-3").string());
    }
  }
  EXPECT_EQ(steps_seen, 3);
  EXPECT_TRUE(fs::exists(dir / "checkpoint-3" / "checkpoint.safetensors"));
  args.resume_from_checkpoint = "latest";
  Trainer resumed(model, args, data, nullptr, {}, classifier_forward());
  const TrainOutput out = resumed.train();
  EXPECT_EQ(out.resumed_at_step, 3);
  EXPECT_EQ(out.global_step, 10);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace remat::train
