// Fuzz support shared by the fuzz/*_fuzz.cpp targets: the parsers of outside
// input read files, so each input goes to one temporary file per process;
// and the rule every target holds a parser to: it returns a valid result or
// throws remat::Error. Any other exception, a failed FUZZ_CHECK, a crash or a
// sanitizer finding aborts, and libFuzzer saves the input (scripts/fuzz.sh).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <typeinfo>

#include "engine/error.h"

// Aborts with the message when cond is false: the result of a parser that did
// not throw is not what its contract promises.
#define FUZZ_CHECK(cond, ...)                                                         \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "FUZZ_CHECK failed: %s: %s\n", #cond, ::fmt::format(__VA_ARGS__).c_str()); \
      std::abort();                                                                   \
    }                                                                                 \
  } while (false)

namespace remat::fuzz {

// A file in the temporary directory that holds the latest input, removed at exit.
class InputFile {
 public:
  explicit InputFile(const std::string& target) {
    std::string pattern = (std::filesystem::temp_directory_path() / ("remat-fuzz-" + target + "-XXXXXX")).string();
    fd_ = ::mkstemp(pattern.data());
    FUZZ_CHECK(fd_ >= 0, "cannot create a temporary file {}", pattern);
    path_ = pattern;
  }
  ~InputFile() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Replaces the file's bytes with data[0, size) and returns its path.
  const std::string& write(const uint8_t* data, size_t size) {
    FUZZ_CHECK(::ftruncate(fd_, 0) == 0, "cannot truncate {}", path_);
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      FUZZ_CHECK(n > 0, "cannot write {} bytes to {}", size, path_);
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_ = -1;
  std::string path_;
};

// Runs parse(): a remat::Error is a rejected input, as it should be; any
// other exception is a bug in the parser.
template <class F>
void expect_result_or_error(const char* target, F&& parse) {
  try {
    parse();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: threw %s, not remat::Error: %s\n", target, typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "%s: threw something that is not a std::exception\n", target);
    std::abort();
  }
}

}  // namespace remat::fuzz
