// Parsing byte counts and integers (train/parse.h): every unit, fractions
// rounded to the byte, and the errors: not a number, not positive, fewer than
// one byte, or more bytes than an int64 holds (issue 16: `--budget 1e30` was
// read as -9223372036854775808 bytes). Cases found by fuzz/budget_fuzz.cpp.
#include "train/parse.h"

#include <gtest/gtest.h>

#include "tests/support/errors.h"

namespace remat::train {
namespace {

using remat::testing::contains;
using remat::testing::error_of;

TEST(ParseBytes, EveryUnit) {
  EXPECT_EQ(parse_bytes("4096", "--budget"), 4096);
  EXPECT_EQ(parse_bytes("100B", "--budget"), 100);
  EXPECT_EQ(parse_bytes("512KiB", "--budget"), 512 * 1024);
  EXPECT_EQ(parse_bytes("64MiB", "--budget"), 64 * 1024 * 1024);
  EXPECT_EQ(parse_bytes("1.5GiB", "--budget"), 3 * 512 * 1024 * 1024LL);
  EXPECT_EQ(parse_bytes("2e6", "--budget"), 2'000'000);
  EXPECT_EQ(parse_bytes("1.4B", "--budget"), 1);  // rounded to the nearest byte
}

TEST(ParseBytes, NotAPositiveNumberIsNamed) {
  for (const char* text : {"", "MiB", "abc", "-5", "0", "12 MiB", "inf", "nan", "1e400"}) {
    const std::string message = error_of([&] { parse_bytes(text, "--budget"); });
    EXPECT_TRUE(contains(message, "--budget: '" + std::string(text) + "' is not a positive byte count")) << message;
  }
}

TEST(ParseBytes, ValuesThatOverflowInt64AreRejected) {
  for (const char* text : {"1e30", "9223372036854775808", "8589934592GiB", "9e9GiB"}) {
    const std::string message = error_of([&] { parse_bytes(text, "--budget"); });
    EXPECT_TRUE(contains(message, "--budget: '" + std::string(text) + "' is more than")) << message;
    EXPECT_TRUE(contains(message, "9223372036854775807")) << message;
  }
  // The largest count a double can hold below 2^63 still parses.
  EXPECT_EQ(parse_bytes("9223372036854774784", "--budget"), 9223372036854774784LL);
}

TEST(ParseBytes, LessThanOneByteIsRejected) {
  for (const char* text : {"0.4", "0.2B", "1e-300KiB"}) {
    const std::string message = error_of([&] { parse_bytes(text, "--budget"); });
    EXPECT_TRUE(contains(message, "--budget: '" + std::string(text) + "' is less than one byte")) << message;
  }
}

TEST(ParseInteger, ValuesAndErrors) {
  EXPECT_EQ(parse_integer<int64_t>("42", "step"), 42);
  EXPECT_EQ(parse_integer<int64_t>("-7", "step"), -7);
  for (const char* text : {"", "4x", " 4", "+4", "99999999999999999999"}) {
    const std::string message = error_of([&] { parse_integer<int64_t>(text, "step"); });
    EXPECT_TRUE(contains(message, "step: '" + std::string(text) + "' is not a valid integer")) << message;
  }
}

}  // namespace
}  // namespace remat::train
