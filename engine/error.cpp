// Builds the message of every remat::Error: the caller's text, then where.
#include "engine/error.h"

namespace remat {

void fail_at(const char* file, int line, const std::string& message) {
  throw Error(fmt::format("{} [{}:{}]", message, file, line));
}

}  // namespace remat
