// The remat program as a user meets it: bad flags, bad values and missing
// data give a message naming what was wrong and a non-zero exit code.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace {

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

Outcome run_remat(const std::string& args) {
  const std::string command = std::string(REMAT_BINARY) + " " + args + " 2>&1";
  Outcome run;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return run;
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe)) run.output += buffer.data();
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Cli, UnknownFlagIsNamed) {
  const Outcome run = run_remat("bench --workload W1 --polcy none");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(contains(run.output, "--polcy")) << run.output;
}

TEST(Cli, MissingDatasetNamesPathAndPackage) {
  const Outcome run = run_remat("train --task fashion-mnist --data-dir /nonexistent/fashion");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "/nonexistent/fashion/train-images-idx3-ubyte.gz")) << run.output;
  EXPECT_TRUE(contains(run.output, "dataset-fashion-mnist")) << run.output;
}

TEST(Cli, UnknownTaskWorkloadAndPolicyAreNamed) {
  Outcome run = run_remat("train --task imagenet");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(contains(run.output, "imagenet")) << run.output;
  run = run_remat("bench --workload W9");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "W9")) << run.output;
  run = run_remat("bench --workload W1 --policy magic");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "magic")) << run.output;
}

TEST(Cli, AFlagOfTheOtherTaskIsAnError) {
  Outcome run = run_remat("train --task fashion-mnist --max-steps 5");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "--max-steps")) << run.output;
  run = run_remat("train --task kjv-gpt --resume");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "--checkpoint")) << run.output;
}

TEST(Cli, ExplainPrintsOneRowPerNode) {
  const Outcome run = run_remat("explain --workload W1 --format csv");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // W1: 16 linear, 15 relu, 1 cross-entropy: 32 nodes, after a header line.
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1 + 32) << run.output;
  // flops, then replay_flops: a linear layer's replay is its forward.
  EXPECT_TRUE(contains(run.output, "0,linear,,\"(256, 1024)\",1048576,536870912,536870912,")) << run.output;
}

TEST(Cli, BadNumberIsNamed) {
  const Outcome run = run_remat("bench --workload W1 --threads zero");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(contains(run.output, "zero")) << run.output;
}

TEST(Cli, BenchPrintsTheWorkloadFieldsAsJson) {
  const Outcome run = run_remat("bench --workload W1 --policy none --threads 1 --steps 1 --warmup 0 --json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const char* field : {"\"workload\":\"W1\"", "\"step_ms_median\"", "\"saved_bytes_after_forward\"",
                            "\"peak_activation_bytes\"", "\"predicted_peak_activation_bytes\"", "\"peak_total_bytes\"",
                            "\"recompute_ms\"", "\"recompute_flops\"", "\"loss_first\"", "\"loss_last\""}) {
    EXPECT_TRUE(contains(run.output, field)) << field << " missing in " << run.output;
  }
}

// The main job as the README runs it: 3 epochs reach 85% test accuracy.
TEST(CliSlow, FashionMnistReaches85PercentIn3Epochs) {
  if (!std::ifstream("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const Outcome run = run_remat("train --task fashion-mnist --json");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  double accuracy = -1;
  int epochs = 0;
  std::istringstream lines(run.output);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("\"test_accuracy\": ");
    if (at == std::string::npos) continue;
    accuracy = std::stod(line.substr(at + 17));
    ++epochs;
  }
  EXPECT_EQ(epochs, 3) << run.output;
  EXPECT_GE(accuracy, 0.85) << run.output;
}

}  // namespace
