// Test support: reading the message of an expected remat::Error.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "engine/error.h"

namespace remat::testing {

// The message of the Error that f throws ("" and a test failure if none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace remat::testing
