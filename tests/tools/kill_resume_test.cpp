// The remat program killed with SIGKILL at random moments (some inside a
// checkpoint's save: it saves every step) and started again with
// --resume-from-checkpoint latest until it finishes: its last checkpoint is
// byte for byte an uninterrupted run's (weights, AdamW's moments, the
// generators' offsets, the loss sums). Issue 43's kill -9 loop, as a slow test.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/files.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

using remat::testing::read_file;

struct Ended {
  bool killed = false;
  int exit_code = -1;
};

// The newest checkpoint-STEP's step in `dir` (-1: none yet).
int64_t newest_step(const fs::path& dir) {
  int64_t newest = -1;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with("checkpoint-")) newest = std::max<int64_t>(newest, std::stoll(name.substr(11)));
  }
  return newest;
}

// Runs `remat args...`, stdout and stderr appended to `log`, until it ends,
// or (given `kill_after`) until it has saved a checkpoint newer than
// `past_step` and `kill_after` more has passed: then SIGKILL, as a power
// cut or the OOM killer. Waiting for a save, not a time, makes every kill
// land after progress however loaded the machine is.
Ended run_remat_until(const std::vector<std::string>& args, const std::string& log, const fs::path& output_dir,
                int64_t past_step, std::optional<milliseconds> kill_after) {
  std::string binary = REMAT_BINARY;
  std::vector<std::string> words = args;
  std::vector<char*> argv{binary.data()};
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  std::optional<Clock::time_point> deadline;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (kill_after && !deadline && newest_step(output_dir) > past_step) deadline = Clock::now() + *kill_after;
    if (deadline && Clock::now() >= *deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return {.killed = true};
    }
    std::this_thread::sleep_for(milliseconds(1));
  }
  return {.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

TEST(CliSlow, KilledAtRandomMomentsARunResumesBitIdentical) {
  const fs::path root = fs::temp_directory_path() / "remat_kill_resume_test";
  fs::remove_all(root);
  fs::create_directories(root);
  // A text of a few hundred words in a fixed pseudo-random order.
  std::mt19937 words(7);
  const char* vocabulary[] = {"in", "the", "beginning", "god", "created", "heaven", "and", "earth", "light", "was"};
  std::string text;
  for (int i = 0; i < 3000; ++i) text += std::string(vocabulary[words() % 10]) + (i % 12 == 11 ? "\n" : " ");
  std::ofstream(root / "text.txt") << text;
  const auto flags = [&](const std::string& output_dir) {
    return std::vector<std::string>{
        "train", "--task", "kjv-gpt", "--text", (root / "text.txt").string(), "--n-layer", "1", "--n-embd", "16",
        "--n-head", "2", "--block-size", "16", "--batch-size", "4", "--dropout", "0.1", "--max-steps", "60",
        "--eval-interval", "1", "--eval-batches", "1", "--sample-chars", "10", "--threads", "1", "--prompt", "the",
        "--save-total-limit", "2", "--output-dir", output_dir};
  };
  const std::string log = (root / "log.txt").string();
  const fs::path whole = root / "whole", killed = root / "killed";

  const auto start = Clock::now();
  ASSERT_EQ(run_remat_until(flags(whole.string()), log, whole, -1, std::nullopt).exit_code, 0) << read_file(log);
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);

  // Each start is killed once it has saved a checkpoint past the one it
  // resumed from, 0 to 40 ms later (a step and its save take a few ms:
  // some kills land inside a save), then one run goes to the end.
  std::mt19937 moments(43);
  std::uniform_int_distribution<int64_t> at(0, 40);
  int kills = 0, mid_save = 0, resumes = 0;
  std::string kill_times;
  for (int attempt = 0; attempt < 10; ++attempt) {
    std::vector<std::string> args = flags(killed.string());
    const int64_t resumed_at = newest_step(killed);
    if (resumed_at >= 0) {
      args.insert(args.end(), {"--resume-from-checkpoint", "latest"});
      ++resumes;
    }
    const milliseconds after(at(moments));
    const Ended ended = run_remat_until(args, log, killed, resumed_at, after);
    if (!ended.killed) {
      ASSERT_EQ(ended.exit_code, 0) << read_file(log);
      break;  // it finished before its kill
    }
    ++kills;
    kill_times += std::to_string(after.count()) + " ms past checkpoint-" + std::to_string(newest_step(killed)) + ", ";
    if (!fs::is_directory(killed)) continue;  // killed before it made its folder
    for (const fs::directory_entry& entry : fs::directory_iterator(killed)) {
      if (entry.path().filename().string().starts_with(".checkpoint-")) ++mid_save;  // a save's temporary left
    }
  }
  std::vector<std::string> args = flags(killed.string());
  if (newest_step(killed) >= 0) args.insert(args.end(), {"--resume-from-checkpoint", "latest"});
  const Ended last = run_remat_until(args, log, killed, -1, std::nullopt);
  ASSERT_EQ(last.exit_code, 0) << read_file(log);
  EXPECT_GE(kills, 3) << "the run took " << took.count() << " ms: too short to kill";
  std::printf("uninterrupted: %lld ms; killed %d times (%s), %d of them during a save; %d resumes\n",
              static_cast<long long>(took.count()), kills, kill_times.c_str(), mid_save, resumes + 1);

  const std::string expected = read_file(whole / "checkpoint-60" / "checkpoint.safetensors");
  const std::string got = read_file(killed / "checkpoint-60" / "checkpoint.safetensors");
  ASSERT_FALSE(expected.empty());
  EXPECT_TRUE(got == expected) << "the resumed run's checkpoint-60 differs from the uninterrupted run's (killed at "
                               << kill_times << "); log: " << read_file(log);
  fs::remove_all(root);
}

}  // namespace
