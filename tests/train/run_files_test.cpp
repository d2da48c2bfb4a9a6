// The files of a training run: a second lock on one checkpoint is an error
// naming the path and the holder's pid, unwritable outputs and two flags that
// name one file are found before anything runs.
#include "train/run_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/error.h"
#include "tests/support/errors.h"

namespace remat::train {
namespace {

namespace fs = std::filesystem;

using testing::contains;
using testing::error_of;

class RunFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("remat_run_files_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(RunFiles, ASecondLockNamesThePathAndTheHolder) {
  const std::string checkpoint = path("ck.safetensors");
  {
    const RunLock first(checkpoint, "--checkpoint");
    EXPECT_EQ(first.lock_path(), checkpoint + ".lock");
    const std::string message = error_of([&] { RunLock second(checkpoint, "--checkpoint"); });
    EXPECT_TRUE(contains(message, "--checkpoint '" + checkpoint + "' is in use by another run")) << message;
    EXPECT_TRUE(contains(message, "process " + std::to_string(::getpid()))) << message;
  }
  EXPECT_FALSE(fs::exists(checkpoint + ".lock"));  // removed on release
  const RunLock again(checkpoint, "--checkpoint");  // and free to take
}

TEST_F(RunFiles, ALockInAMissingFolderIsAnError) {
  const std::string message = error_of([&] { RunLock lock(path("no/such/ck"), "--checkpoint"); });
  EXPECT_TRUE(contains(message, "cannot create its lock file")) << message;
}

TEST_F(RunFiles, OutputsThatCannotBeWrittenAreFoundFirst) {
  EXPECT_TRUE(contains(error_of([&] { check_output_path(dir_.string(), "--checkpoint"); }), "is a folder"));
  EXPECT_TRUE(contains(error_of([&] { check_output_path(path("missing/w.safetensors"), "--save-weights"); }),
                       "its folder '" + path("missing") + "' does not exist"));
  std::ofstream(path("file")) << "x";
  EXPECT_TRUE(contains(error_of([&] { check_output_path(path("file/w.safetensors"), "--save-weights"); }),
                       "is not a folder"));
  // Read-only for everyone, root included.
  EXPECT_TRUE(contains(error_of([&] { check_output_path("/proc/remat.safetensors", "--save-weights"); }),
                       "cannot write in its folder '/proc'"));
  check_output_path(path("w.safetensors"), "--save-weights");
  check_output_path("", "--save-weights");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);  // no probe left behind
}

TEST_F(RunFiles, TwoFlagsNamingOneFileAreAnError) {
  const std::string text = path("text.txt");
  std::ofstream(text) << "abc";
  EXPECT_TRUE(contains(error_of([&] { check_distinct_paths({{"--checkpoint", text}, {"--text", text}}); }),
                       "--checkpoint '" + text + "' and --text '" + text + "' name the same file"));
  const std::string dotted = (dir_ / "." / "text.txt").string();
  EXPECT_TRUE(contains(error_of([&] { check_distinct_paths({{"--save-weights", dotted}, {"--text", text}}); }),
                       "name the same file"));
  fs::create_symlink(text, path("link.txt"));
  EXPECT_TRUE(contains(error_of([&] { check_distinct_paths({{"--checkpoint", path("link.txt")}, {"--text", text}}); }),
                       "name the same file"));
  const std::string ck = path("ck");
  EXPECT_TRUE(contains(error_of([&] { check_distinct_paths({{"--checkpoint", ck}, {"--save-weights", ck}}); }),
                       "name the same file"));  // neither exists yet
  check_distinct_paths({{"--checkpoint", ck}, {"--save-weights", path("w")}, {"--text", text}});
  check_distinct_paths({{"--checkpoint", ""}, {"--save-weights", ""}, {"--text", text}});
}

// A folder's lock sits beside it ("w/" and "w" share "w.lock"), and a lock
// file of its own keeps the message on the path the user gave (the Trainer
// locks output_dir through DIR/trainer.lock, and names DIR).
TEST_F(RunFiles, AFoldersLockNamesTheFolderTheUserGave) {
  const std::string weights = path("weights");
  {
    const RunLock first(weights + "/", "--save-weights");
    EXPECT_EQ(first.lock_path(), weights + ".lock");
    const std::string message = error_of([&] { RunLock second(weights, "--save-weights"); });
    EXPECT_TRUE(contains(message, "--save-weights '" + weights + "' is in use by another run")) << message;
  }
  fs::create_directories(path("out"));
  const RunLock held(path("out"), "output_dir", path("out/trainer.lock"));
  EXPECT_EQ(held.lock_path(), path("out/trainer.lock"));
  const std::string message = error_of([&] { RunLock second(path("out"), "output_dir", path("out/trainer.lock")); });
  EXPECT_TRUE(contains(message, "output_dir '" + path("out") + "' is in use by another run")) << message;
  EXPECT_FALSE(contains(message, "'" + path("out/trainer") + "'")) << message;
}

// A disk without room for an output is found before the run: the message
// names the flag, the folder and both numbers.
TEST_F(RunFiles, AnOutputWithoutRoomIsFoundFirst) {
  const int64_t too_much = int64_t{1} << 62;  // 4 EiB: no disk has it free
  std::string message = error_of([&] { check_free_space(path("w"), too_much, "--save-weights"); });
  EXPECT_TRUE(contains(message, "--save-weights '" + path("w") + "': its folder '" + dir_.string() + "' has "))
      << message;
  EXPECT_TRUE(contains(message, "the run would write " + std::to_string(too_much) + " bytes")) << message;
  // A folder not made yet is measured on the nearest one that is.
  message = error_of([&] { check_free_space(path("new/deeper/w"), too_much, "--save-weights"); });
  EXPECT_TRUE(contains(message, "its folder '" + dir_.string() + "'")) << message;
  check_free_space(path("w"), 1, "--save-weights");
  check_free_space("", too_much, "--save-weights");
}

}  // namespace
}  // namespace remat::train
