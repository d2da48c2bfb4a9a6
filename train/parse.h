// Parsing numbers that come from files (checkpoint metadata): a malformed
// value is a remat::Error naming what was being read and the text found.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/error.h"

namespace remat::train {

template <class Integer>
Integer parse_integer(std::string_view text, std::string_view what) {
  Integer value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  REMAT_CHECK(error == std::errc() && end == text.data() + text.size(), "{}: '{}' is not a valid integer", what, text);
  return value;
}

// A byte count such as "64MiB", "1.5GiB", "512KiB" or "4096" (bytes), rounded to
// the nearest byte. Errors: not a positive number, less than one byte, or more
// than an int64 holds (INT64_MAX bytes); each names `what` and the text.
int64_t parse_bytes(std::string_view text, std::string_view what);

}  // namespace remat::train
