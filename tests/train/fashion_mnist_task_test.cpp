// The Fashion-MNIST task's options are checked before its data is read: a
// bad value is an error naming the flag (the training loop itself runs in
// tests/tools/cli_test.cpp and under mpirun, on Debian's dataset).
#include "train/fashion_mnist_task.h"

#include <gtest/gtest.h>

#include "engine/error.h"

namespace remat::train {
namespace {

std::string error_of(const FashionMnistOptions& options) {
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
    const std::string message = error_of(o);
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

}  // namespace
}  // namespace remat::train
