// `remat train` stopped by SIGINT or SIGTERM (train/interrupt.h, caught in
// tools/remat.cpp): exit code 130 or 143, a message naming the signal, the
// step and the checkpoint saved there, and a run that resumes from it; without
// --output-dir the message says nothing was saved. A tiny kjv-gpt model, so
// each run takes well under a second.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/errors.h"
#include "tests/support/files.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

using remat::testing::contains;

using remat::testing::read_file;

struct Finished {
  int exit_code = -1;  // -1: it did not exit by itself
  std::string out, err;
};

// Starts `remat train ARGS`, waits until its table's header is on stdout
// (its handlers are in place by then, since main installs them before the
// command runs), sends `signal`, and waits for it to end.
Finished run_and_signal(const std::vector<std::string>& args, int signal, const fs::path& dir) {
  std::vector<std::string> argv{REMAT_BINARY, "train"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> pointers;
  for (std::string& arg : argv) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  int out[2];
  if (pipe(out) != 0) return {};
  const std::string err_path = (dir / "stderr.txt").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, pointers.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    return {};
  }
  FILE* stdout_of_child = fdopen(out[0], "r");
  std::string seen;
  char line[4096];
  while (!contains(seen, "train_loss") && std::fgets(line, sizeof line, stdout_of_child) != nullptr) seen += line;
  kill(pid, signal);
  while (std::fgets(line, sizeof line, stdout_of_child) != nullptr) seen += line;
  std::fclose(stdout_of_child);
  int status = 0;
  waitpid(pid, &status, 0);
  return {.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1, .out = seen, .err = read_file(err_path)};
}

class CliInterrupt : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("remat_cli_interrupt_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream text(dir_ / "text.txt");
    for (int i = 0; i < 400; ++i) text << "in the beginning was the word, and the word was with god. ";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> tiny(int64_t max_steps, bool with_output_dir = true) const {
    std::vector<std::string> args{"--task", "kjv-gpt", "--text", (dir_ / "text.txt").string(), "--n-layer", "1",
                                  "--n-embd", "16", "--n-head", "2", "--block-size", "16", "--batch-size", "4",
                                  "--max-steps", std::to_string(max_steps), "--eval-interval", "100000",
                                  "--eval-batches", "1", "--sample-chars", "4", "--prompt", "in", "--threads", "1"};
    if (with_output_dir) args.insert(args.end(), {"--output-dir", (dir_ / "out").string()});
    return args;
  }

  // Stopped by `signal`: its exit code and message, the checkpoint named
  // there, and a run that resumes from it to two steps further.
  void stops_saves_and_resumes(int signal, const std::string& name, int exit_code) {
    const Finished stopped = run_and_signal(tiny(1000000), signal, dir_);
    ASSERT_EQ(stopped.exit_code, exit_code) << stopped.err;
    std::smatch found;
    const std::regex said("remat: " + name + ": training stopped after step ([0-9]+); saved checkpoint '([^']+)'");
    ASSERT_TRUE(std::regex_search(stopped.err, found, said)) << stopped.err;
    EXPECT_TRUE(contains(stopped.err, "--resume-from-checkpoint latest")) << stopped.err;
    const int64_t step = std::stoll(found[1]);
    const fs::path checkpoint = found[2].str();
    EXPECT_EQ(checkpoint, dir_ / "out" / ("checkpoint-" + std::to_string(step)));
    EXPECT_TRUE(fs::exists(checkpoint / "checkpoint.safetensors")) << checkpoint;
    EXPECT_FALSE(contains(stopped.out, "Sample")) << stopped.out;  // nothing after training ran
    std::vector<std::string> resume = tiny(step + 2);
    resume.insert(resume.end(), {"--resume-from-checkpoint", "latest"});
    std::string command = REMAT_BINARY + std::string(" train");
    for (const std::string& arg : resume) command += " '" + arg + "'";
    command += " >" + (dir_ / "resumed.txt").string() + " 2>&1";
    const int status = std::system(command.c_str());
    const std::string resumed = read_file(dir_ / "resumed.txt");
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << resumed;
    EXPECT_TRUE(contains(resumed, "(resumed at step " + std::to_string(step) + ")")) << resumed;
    EXPECT_TRUE(fs::exists(dir_ / "out" / ("checkpoint-" + std::to_string(step + 2))));
  }

  fs::path dir_;
};

TEST_F(CliInterrupt, SigintSavesACheckpointAndExits130) { stops_saves_and_resumes(SIGINT, "SIGINT", 130); }

TEST_F(CliInterrupt, SigtermSavesACheckpointAndExits143) { stops_saves_and_resumes(SIGTERM, "SIGTERM", 143); }

TEST_F(CliInterrupt, WithoutAnOutputDirTheMessageSaysNothingWasSaved) {
  const Finished stopped = run_and_signal(tiny(1000000, false), SIGINT, dir_);
  ASSERT_EQ(stopped.exit_code, 130) << stopped.err;
  EXPECT_TRUE(contains(stopped.err, "no checkpoint saved (no --output-dir")) << stopped.err;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

}  // namespace
