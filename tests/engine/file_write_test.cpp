// Files written whole or not at all (engine/file_write.h): a write that fails
// (a fault injected by REMAT_FAULT_WRITE mid-body or at its commit, or a
// real full tmpfs where the test may mount one) leaves the old file
// byte-identical and no temporary behind, a new file that fails leaves no
// file, and every error names the file (or its folder) and the errno.
#include "engine/file_write.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "tests/support/errors.h"

namespace remat {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::error_of;

std::string bytes_of(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// The names in `dir`, sorted.
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// REMAT_FAULT_WRITE set for one scope.
class FaultScope {
 public:
  explicit FaultScope(const std::string& spec) { ::setenv("REMAT_FAULT_WRITE", spec.c_str(), 1); }
  ~FaultScope() { ::unsetenv("REMAT_FAULT_WRITE"); }
};

// `text` of `n` bytes, none alike in a row, so that a truncated or mixed copy
// differs.
std::string text_of(size_t n, char seed) {
  std::string text(n, ' ');
  for (size_t i = 0; i < n; ++i) text[i] = static_cast<char>('a' + (seed + i * 7) % 26);
  return text;
}

class FileWrite : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("remat_file_write_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Whether the file at `path`, holding `old` first, still holds it byte for
  // byte after `write` throws (a write that does not throw fails the test).
  bool old_file_stands(const fs::path& path, const std::string& old, const std::function<void()>& write,
                       std::string* message) {
    write_file_atomically(path.string(), old);
    *message = error_of(write);
    return fs::exists(path) && bytes_of(path) == old;
  }

  fs::path dir_;
};

TEST_F(FileWrite, WritesTheBytesWholeAndReplacesTheOldFile) {
  const fs::path path = dir_ / "plan.json";
  write_file_atomically(path.string(), "first");
  EXPECT_EQ(bytes_of(path), "first");
  AtomicFile file(path.string());
  file.write("sec");
  file.write(std::string("ond"));
  EXPECT_EQ(bytes_of(path), "first");  // not yet: the name holds the old file until commit
  file.commit();
  EXPECT_EQ(bytes_of(path), "second");
  EXPECT_EQ(names_in(dir_), std::vector<std::string>{"plan.json"});  // no temporary left
}

// A write that fails mid-body, after some of its bytes reached the
// temporary: the old file stands, the error names the file and ENOSPC.
TEST_F(FileWrite, AFullDiskMidBodyLeavesTheOldFileByteIdentical) {
  const fs::path path = dir_ / "profile.json";
  const std::string old = text_of(1000, 1), replacement = text_of(3000, 2);
  std::string message;
  const FaultScope fault("ENOSPC:profile.json:2000");
  const bool stands = old_file_stands(path, old, [&] {
    AtomicFile file(path.string());
    file.write(replacement.substr(0, 1500));
    // The bytes really went somewhere: to the temporary, beside the file.
    std::vector<std::string> names = names_in(dir_);
    ASSERT_EQ(names.size(), 2u);
    EXPECT_TRUE(names[1].starts_with("profile.json.tmp.")) << names[1];
    EXPECT_EQ(fs::file_size(dir_ / names[1]), 1500u);
    file.write(replacement.substr(1500));  // past 2000 bytes: No space left on device
    file.commit();
  }, &message);
  EXPECT_TRUE(stands);
  EXPECT_TRUE(contains(message, "cannot write '" + path.string() + "'")) << message;
  EXPECT_TRUE(contains(message, "No space left on device (ENOSPC)")) << message;
  EXPECT_TRUE(contains(message, "the file is left as it was")) << message;
  EXPECT_EQ(names_in(dir_), std::vector<std::string>{"profile.json"});
}

// Every byte written, the flush to disk fails (as fsync does on a full
// disk): the old file stands all the same.
TEST_F(FileWrite, AFailureAtCommitLeavesTheOldFileByteIdentical) {
  const fs::path path = dir_ / "w.safetensors";
  const std::string old = text_of(100, 3), replacement = text_of(400, 4);
  std::string message;
  const FaultScope fault("ENOSPC:w.safetensors:400");
  EXPECT_TRUE(old_file_stands(path, old, [&] { write_file_atomically(path.string(), replacement); }, &message));
  EXPECT_TRUE(contains(message, "cannot write '" + path.string() + "': flushing to disk failed: No space left on "
                                "device (ENOSPC)")) << message;
  EXPECT_EQ(names_in(dir_), std::vector<std::string>{"w.safetensors"});
}

// The check above catches the bug it is there for: a writer that truncates
// the file in place and fails part way (what save_profile did) does not
// pass it.
TEST_F(FileWrite, TheCheckCatchesAWriteInPlace) {
  const fs::path path = dir_ / "profile.json";
  const std::string old = text_of(1000, 5), replacement = text_of(3000, 6);
  std::string message;
  const bool stands = old_file_stands(path, old, [&] {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file << replacement.substr(0, 2000);
    file.close();
    REMAT_FAIL("writing '{}' failed: {}", path.string(), errno_text(ENOSPC));  // the disk filled at 2000 bytes
  }, &message);
  EXPECT_FALSE(stands);
}

// A file that did not exist and fails to be written leaves no file at all,
// and the error says so.
TEST_F(FileWrite, ANewFileThatFailsLeavesNoFile) {
  const fs::path path = dir_ / "tradeoff.csv";
  const FaultScope fault("ENOSPC:tradeoff.csv:10");
  const std::string message = error_of([&] { write_file_atomically(path.string(), text_of(50, 7)); });
  EXPECT_TRUE(contains(message, "cannot write '" + path.string() + "'")) << message;
  EXPECT_TRUE(contains(message, "ENOSPC")) << message;
  EXPECT_TRUE(contains(message, "no file was written")) << message;
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(names_in(dir_).empty());
}

// The fault touches only the paths it names; a bad fault is an error.
TEST_F(FileWrite, AFaultAppliesOnlyToThePathsItNames) {
  {
    const FaultScope fault("EIO:other.json");
    write_file_atomically((dir_ / "plan.json").string(), "kept");
    EXPECT_EQ(bytes_of(dir_ / "plan.json"), "kept");
    EXPECT_TRUE(contains(error_of([&] { write_file_atomically((dir_ / "other.json").string(), "x"); }),
                         "Input/output error (EIO)"));
  }
  const FaultScope fault("ENOSUCHERROR");
  EXPECT_TRUE(contains(error_of([&] { write_file_atomically((dir_ / "plan.json").string(), "x"); }),
                       "'ENOSUCHERROR' is not an errno name"));
}

TEST_F(FileWrite, AMissingFolderIsNamed) {
  const fs::path path = dir_ / "no" / "such" / "profile.json";
  const std::string message = error_of([&] { write_file_atomically(path.string(), "x"); });
  EXPECT_TRUE(contains(message, "cannot write '" + path.string() + "'")) << message;
  EXPECT_TRUE(contains(message, "its folder '" + (dir_ / "no" / "such").string() + "'")) << message;
  EXPECT_TRUE(contains(message, "(ENOENT)")) << message;
  EXPECT_TRUE(contains(error_of([&] { write_file_atomically(dir_.string(), "x"); }), "it is a folder"));
}

// A folder the writer may not write in: EACCES, naming the folder. Root may
// write anywhere, so as root the write is made by a child process that has
// become `nobody` first.
TEST_F(FileWrite, AFolderWithoutPermissionIsNamed) {
  const fs::path folder = dir_ / "read-only";
  fs::create_directories(folder);
  write_file_atomically((folder / "w.json").string(), "old");
  fs::permissions(folder, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(dir_, fs::perms::others_exec, fs::perm_options::add);  // nobody may reach it
  const std::string path = (folder / "w.json").string();
  std::string message;
  if (::geteuid() != 0) {
    message = error_of([&] { write_file_atomically(path, "new"); });
  } else {
    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(pipe_fds[0]);
      std::string text = "the child could not become nobody";
      if (::setgid(65534) == 0 && ::setuid(65534) == 0) {
        try {
          write_file_atomically(path, "new");
          text = "no error";
        } catch (const Error& e) {
          text = e.what();
        }
      }
      (void)!::write(pipe_fds[1], text.data(), text.size());
      ::_exit(0);
    }
    ::close(pipe_fds[1]);
    char buffer[4096];
    ssize_t n = 0;
    while ((n = ::read(pipe_fds[0], buffer, sizeof(buffer))) > 0) message.append(buffer, static_cast<size_t>(n));
    ::close(pipe_fds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
  }
  EXPECT_TRUE(contains(message, "cannot write '" + path + "'")) << message;
  EXPECT_TRUE(contains(message, "its folder '" + folder.string() + "'")) << message;
  EXPECT_TRUE(contains(message, "Permission denied (EACCES)")) << message;
  EXPECT_EQ(bytes_of(path), "old");
  fs::permissions(folder, fs::perms::owner_all, fs::perm_options::add);
}

// A real full disk: a 64 KiB tmpfs, where the test runs as root and may
// mount one (CI does). A file that fits, then a bigger one that does not:
// the kernel's own ENOSPC, and the old file stands.
TEST_F(FileWrite, ARealFullDiskLeavesTheOldFileByteIdentical) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root; the injected faults above cover the rest";
  const fs::path mount_point = dir_ / "small";
  fs::create_directories(mount_point);
  if (::mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=64k") != 0) {
    GTEST_SKIP() << "mount -t tmpfs -o size=64k failed (" << errno_text(errno)
                 << "): a container without CAP_SYS_ADMIN; the injected faults above cover the rest";
  }
  struct Unmount {
    const fs::path& at;
    ~Unmount() { ::umount(at.c_str()); }
  } unmount{mount_point};
  const fs::path path = mount_point / "profile.json";
  const std::string old = text_of(20 << 10, 8), replacement = text_of(50 << 10, 9);  // 20 + 50 KiB > 64 KiB
  std::string message;
  const bool stands = old_file_stands(path, old, [&] {
    AtomicFile file(path.string());
    for (size_t at = 0; at < replacement.size(); at += 4096) file.write(replacement.substr(at, 4096));
    file.commit();
  }, &message);
  EXPECT_TRUE(stands);
  EXPECT_TRUE(contains(message, "cannot write '" + path.string() + "'")) << message;
  EXPECT_TRUE(contains(message, "No space left on device (ENOSPC)")) << message;
  EXPECT_EQ(names_in(mount_point), std::vector<std::string>{"profile.json"});  // the temporary is gone
}

}  // namespace
}  // namespace remat
