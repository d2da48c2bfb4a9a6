// Files written whole or not at all; see file_write.h, Note [Whole or not at all].
#include "engine/file_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "engine/error.h"

namespace remat {
namespace {

namespace fs = std::filesystem;

// REMAT_FAULT_WRITE's fault, where it applies to `path` (file_write.h).
struct Fault {
  int error = 0;
  int64_t after_bytes = 0;
};

int errno_named(std::string_view name) {
  for (int e = 1; e < 134; ++e) {
    const char* known = ::strerrorname_np(e);
    if (known != nullptr && name == known) return e;
  }
  REMAT_FAIL("REMAT_FAULT_WRITE: '{}' is not an errno name such as ENOSPC or EACCES", name);
}

std::optional<Fault> fault_for(const std::string& path) {
  const char* spec = std::getenv("REMAT_FAULT_WRITE");
  if (spec == nullptr || *spec == '\0') return std::nullopt;
  const std::string_view text(spec);
  const size_t first = text.find(':');
  const std::string_view name = text.substr(0, first);
  std::string_view filter, bytes;
  if (first != std::string_view::npos) {
    const std::string_view rest = text.substr(first + 1);
    const size_t second = rest.find(':');
    filter = rest.substr(0, second);
    if (second != std::string_view::npos) bytes = rest.substr(second + 1);
  }
  Fault fault{.error = errno_named(name)};
  if (!bytes.empty()) {
    const auto [end, error] = std::from_chars(bytes.data(), bytes.data() + bytes.size(), fault.after_bytes);
    REMAT_CHECK(error == std::errc() && end == bytes.data() + bytes.size() && fault.after_bytes >= 0,
                "REMAT_FAULT_WRITE: '{}' is not a byte count", bytes);
  }
  if (!filter.empty() && path.find(filter) == std::string::npos) return std::nullopt;
  return fault;
}

// The folder of `path`, for its fsync ("." for a bare name).
std::string folder_of(const std::string& path) {
  const fs::path folder = fs::path(path).parent_path();
  return folder.empty() ? std::string(".") : folder.string();
}

}  // namespace

std::string errno_text(int error) {
  const char* name = ::strerrorname_np(error);
  return name != nullptr ? fmt::format("{} ({})", std::strerror(error), name) : std::strerror(error);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  REMAT_CHECK(!path_.empty(), "write: no file name given");
  std::error_code ec;
  REMAT_CHECK(!fs::is_directory(path_, ec), "cannot write '{}': it is a folder", path_);
  if (const std::optional<Fault> fault = fault_for(path_)) {
    fault_errno_ = fault->error;
    fault_after_bytes_ = fault->after_bytes;
  }
  static std::atomic<uint64_t> writes{0};
  for (int attempt = 0; fd_ < 0 && attempt < 100; ++attempt) {
    tmp_ = fmt::format("{}.tmp.{}.{}", path_, ::getpid(), writes++);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) {
    const int error = errno;
    REMAT_FAIL("cannot write '{}': creating a file in its folder '{}' failed: {}", path_, folder_of(path_),
               errno_text(error));
  }
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicFile::fail(std::string_view doing, int error) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  const bool existed = ::access(path_.c_str(), F_OK) == 0;
  REMAT_FAIL("cannot write '{}': {} failed: {}; {}", path_, doing, errno_text(error),
             existed ? "the file is left as it was" : "no file was written");
}

void AtomicFile::write(const void* data, size_t size) {
  REMAT_CHECK(fd_ >= 0 && !committed_, "write '{}': the file is closed", path_);
  const auto* bytes = static_cast<const char*>(data);
  if (fault_errno_ != 0 && written_ + static_cast<int64_t>(size) > fault_after_bytes_) fail("writing", fault_errno_);
  while (size > 0) {
    const ssize_t n = ::write(fd_, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("writing", n < 0 ? errno : EIO);
    bytes += n;
    size -= static_cast<size_t>(n);
    written_ += n;
  }
}

void AtomicFile::commit() {
  REMAT_CHECK(fd_ >= 0 && !committed_, "write '{}': the file is closed", path_);
  if (fault_errno_ != 0 && written_ >= fault_after_bytes_) fail("flushing to disk", fault_errno_);
  if (::fsync(fd_) != 0) fail("flushing to disk", errno);  // the bytes are on disk before the name points at them
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0) fail("closing", errno);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail(fmt::format("renaming '{}' onto it", tmp_), errno);
  committed_ = true;
  sync_folder(folder_of(path_));  // the rename itself, flushed with the folder
}

void sync_folder(const std::string& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  AtomicFile file(path);
  file.write(bytes);
  file.commit();
}

}  // namespace remat
