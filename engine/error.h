// Errors: one macro family for every check in the engine.
// REMAT_CHECK(cond, "fmt {}", values...) throws remat::Error whose message
// names the values that were wrong and ends with [file:line]. Used by every
// layer; CUDA, NCCL and MPI checks will follow the same shape.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace remat {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail_at(const char* file, int line, const std::string& message);

}  // namespace remat

#define REMAT_FAIL(...) ::remat::fail_at(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__))

#define REMAT_CHECK(cond, ...)        \
  do {                                \
    if (!(cond)) [[unlikely]] {       \
      REMAT_FAIL(__VA_ARGS__);        \
    }                                 \
  } while (false)
