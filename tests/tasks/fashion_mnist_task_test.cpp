// The Fashion-MNIST task's options are checked before its data is read: a
// bad value is an error naming the flag (the training loop itself runs in
// tests/tools/cli_test.cpp and under mpirun, on Debian's dataset).
#include "tasks/fashion_mnist_task.h"

#include <gtest/gtest.h>

#include <map>
#include <string_view>

#include <fmt/format.h>

#include "engine/error.h"

namespace remat::tasks {

using namespace remat::train;  // the Trainer, its arguments and its checks
namespace {

std::string fashion_mnist_error(const FashionMnistOptions& options) {
  try {
    train_fashion_mnist(options);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(FashionMnistTask, OptionsOutOfRangeAreErrorsBeforeTheData) {
  // A folder without the data: an option's error must come first.
  const FashionMnistOptions options{.data_dir = "/nonexistent/fashion-mnist"};
  const auto expect_error = [&](FashionMnistOptions o, const std::string& part) {
    const std::string message = fashion_mnist_error(o);
    EXPECT_NE(message.find(part), std::string::npos) << message;
  };
  FashionMnistOptions o = options;
  o.max_batches = -1;
  expect_error(o, "--max-batches must be >= 0 (0: all), got -1");
  o = options;
  o.batch_size = 0;
  expect_error(o, "--batch-size must be at least 1, got 0");
  o = options;
  o.lr = -1;
  expect_error(o, "--lr must be > 0, got -1");
  o = options;
  o.threads = 1 << 20;
  expect_error(o, "--threads must be between 1 and");
  o = options;
  o.gradient_accumulation_steps = 0;
  expect_error(o, "--gradient-accumulation-steps must be at least 1, got 0");
  o = options;
  o.device = "tpu";
  expect_error(o, "device 'tpu': expected cpu, cuda, cuda:N or meta");
  o.device = "meta";
  expect_error(o, "--device meta holds no values to train");
  o.device = "cuda:99";
  expect_error(o, "cuda:99");  // no such GPU (or no CUDA in the build)
  expect_error(options, "/nonexistent/fashion-mnist");  // and with good options, the data's
}

// Note [One value per setting] (train/training_arguments.cpp): every flag
// of the task that gives a training argument, given with a trainer flag
// that gives the argument another value, is an error naming both, before
// the data is read; so are two trainer flags of one argument.
TEST(FashionMnistTask, EveryTaskFlagAndATrainerFlagOfItsArgumentMustAgree) {
  const FashionMnistOptions options{.data_dir = "/nonexistent/fashion-mnist"};
  const std::map<std::string_view, std::string> other{
      {"num_train_epochs", "7"}, {"per_device_train_batch_size", "5"}, {"learning_rate", "0.5"},
      {"weight_decay", "0.5"}, {"gradient_accumulation_steps", "3"}, {"local_sgd_steps", "3"}, {"diloco", "true"},
      {"outer_lr", "0.5"}, {"outer_momentum", "0.5"}, {"seed", "9"}, {"device", "meta"}};
  ASSERT_EQ(task_flags(options).size(), other.size());
  for (const TaskFlag<FashionMnistOptions>& row : task_flags(options)) {
    SCOPED_TRACE(std::string(row.flag));
    FashionMnistOptions o = options;
    o.flags_given = {std::string(row.flag)};
    const std::string trainer_flag = fmt::format("--{}={}", row.argument, other.at(row.argument));
    o.trainer_flags = {trainer_flag};
    const std::string message = fashion_mnist_error(o);
    EXPECT_NE(message.find(std::string(row.flag) + " "), std::string::npos) << message;
    EXPECT_NE(message.find(" and " + trainer_flag + " give training argument " + std::string(row.argument)),
              std::string::npos) << message;
  }
  // kjv-gpt's --max-steps reaches this task as a trainer flag: with --max_steps too.
  FashionMnistOptions o = options;
  o.trainer_flags = {"--max-steps", "4", "--max_steps", "6"};
  std::string message = fashion_mnist_error(o);
  EXPECT_NE(message.find("--max-steps 4 and --max_steps 6 give training argument max_steps two values"),
            std::string::npos) << message;
  o.flags_given = {"--batch-size"};
  o.batch_size = 4;
  o.trainer_flags = {"--per-device-train-batch-size", "4"};  // the same value
  message = fashion_mnist_error(o);
  EXPECT_NE(message.find("/nonexistent/fashion-mnist"), std::string::npos) << message;
}

// The header is made from the arguments the run trains with.
TEST(FashionMnistTask, TheHeaderShowsTheArgumentsTheRunTrainsWith) {
  FashionMnistOptions o{.hidden = {32}, .threads = 1};
  std::string header = run_header(o, trainer_arguments(o));
  EXPECT_EQ(header, "task fashion-mnist: MLP 784-32-10, AdamW lr 0.002, batch 64 per rank, 3 epochs, 1 threads; "
                    "1 process");
  o.trainer_flags = {"--learning-rate", "1e-3", "--per_device_train_batch_size", "8", "--max-steps", "5"};
  header = run_header(o, trainer_arguments(o));
  EXPECT_EQ(header, "task fashion-mnist: MLP 784-32-10, AdamW lr 0.001, batch 8 per rank, 5 steps, 1 threads; "
                    "1 process");
}

}  // namespace
}  // namespace remat::tasks
