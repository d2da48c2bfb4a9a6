// The files of a training run; see run_files.h.
#include "train/run_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <limits>

#include "engine/error.h"
#include "engine/file_write.h"

namespace remat::train {
namespace {

namespace fs = std::filesystem;

// The pid a holder wrote into its lock file, or a note when there is none yet.
std::string holder_of(int fd) {
  char text[32] = {};
  const ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
  std::string pid(text, n > 0 ? static_cast<size_t>(n) : 0);
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() ? "whose pid is not written yet" : "process " + pid;
}

// Whether `fd` is still the file named `path`: a holder removes the lock file
// when it lets go, so a lock taken on a file opened just before that removal
// guards a name nobody else sees.
bool still_named(int fd, const std::string& path) {
  struct stat held{}, named{};
  return ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
         held.st_ino == named.st_ino;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ea, eb, ec;
  const fs::path ca = fs::weakly_canonical(fs::absolute(a), ea), cb = fs::weakly_canonical(fs::absolute(b), eb);
  if (!ea && !eb && ca == cb) return true;
  return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec);
}

// path + ".lock", for a folder "out/" too ("out.lock", not "out/.lock").
std::string lock_file_of(const std::string& path) {
  std::string stem = path;
  while (stem.size() > 1 && stem.back() == '/') stem.pop_back();
  return stem + ".lock";
}

}  // namespace

RunLock::RunLock(const std::string& path, std::string_view flag, std::string lock_file)
    : lock_path_(lock_file.empty() ? lock_file_of(path) : std::move(lock_file)) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    REMAT_CHECK(fd >= 0, "{} '{}': cannot create its lock file '{}': {}", flag, path, lock_path_, errno_text(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      const std::string holder = holder_of(fd);
      ::close(fd);
      REMAT_CHECK(error == EWOULDBLOCK, "{} '{}': cannot lock '{}': {}", flag, path, lock_path_, errno_text(error));
      REMAT_FAIL("{} '{}' is in use by another run ({}, holding '{}'); wait for it to end, or give this run another "
                 "path", flag, path, holder, lock_path_);
    }
    if (still_named(fd, lock_path_)) {
      const std::string pid = std::to_string(::getpid()) + "\n";
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
        const int error = errno;
        ::close(fd);
        REMAT_FAIL("{} '{}': cannot write its lock file '{}': {}", flag, path, lock_path_, errno_text(error));
      }
      fd_ = fd;
      return;
    }
    ::close(fd);  // the previous holder removed it between open and flock: take the new one
  }
  REMAT_FAIL("{} '{}': its lock file '{}' keeps being replaced; is another run starting and stopping on it?", flag, path,
             lock_path_);
}

RunLock::~RunLock() {
  // Removed while still held, so a run that opens it now finds it unnamed
  // (still_named) and creates a fresh one.
  ::unlink(lock_path_.c_str());
  ::close(fd_);
}

void check_output_path(const std::string& path, std::string_view flag) {
  if (path.empty()) return;
  std::error_code ec;
  REMAT_CHECK(!fs::is_directory(path, ec), "{} '{}' is a folder; give the name of a file (e.g. '{}')", flag, path,
              (fs::path(path) / "run.safetensors").string());
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  REMAT_CHECK(fs::exists(folder, ec), "{} '{}': its folder '{}' does not exist", flag, path, folder.string());
  REMAT_CHECK(fs::is_directory(folder, ec), "{} '{}': '{}' is not a folder", flag, path, folder.string());
  // Permissions alone do not say (root, read-only mounts): create a file.
  static std::atomic<uint64_t> probes{0};
  const std::string probe = (folder / fmt::format(".remat-probe.{}.{}", ::getpid(), probes++)).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  REMAT_CHECK(fd >= 0, "{} '{}': cannot write in its folder '{}': {}", flag, path, folder.string(),
              errno_text(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

void check_free_space(const std::string& path, int64_t bytes, std::string_view flag) {
  if (path.empty()) return;
  std::error_code ec;
  fs::path folder = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
  while (!folder.empty() && !fs::is_directory(folder, ec)) folder = folder.parent_path();
  if (folder.empty()) folder = ".";
  struct statvfs disk{};
  if (::statvfs(folder.c_str(), &disk) != 0) return;  // cannot say: the write will tell
  const auto free_bytes = static_cast<int64_t>(std::min<unsigned long long>(
      static_cast<unsigned long long>(disk.f_bavail) * disk.f_frsize, std::numeric_limits<int64_t>::max()));
  const auto amount = [](int64_t n) {
    return n < (1 << 20) ? fmt::format("{} bytes", n)
                         : fmt::format("{} bytes ({:.1f} MiB)", n, static_cast<double>(n) / (1 << 20));
  };
  REMAT_CHECK(free_bytes >= bytes, "{} '{}': its folder '{}' has {} free, and the run would write {} there; free "
              "some space or give another folder", flag, path, folder.string(), amount(free_bytes), amount(bytes));
}

void check_distinct_paths(const std::vector<std::pair<std::string, std::string>>& flag_paths) {
  for (size_t i = 0; i < flag_paths.size(); ++i) {
    for (size_t j = i + 1; j < flag_paths.size(); ++j) {
      const auto& [flag_a, a] = flag_paths[i];
      const auto& [flag_b, b] = flag_paths[j];
      if (a.empty() || b.empty()) continue;
      REMAT_CHECK(!same_file(a, b), "{} '{}' and {} '{}' name the same file; the run would write one over the other, "
                  "give each its own", flag_a, a, flag_b, b);
    }
  }
}

}  // namespace remat::train
