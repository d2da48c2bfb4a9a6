// libFuzzer target: train/parse.h's parse_bytes (the `--budget` and
// `--checkpointing-budget` byte counts) and parse_integer (checkpoint
// metadata) on arbitrary text. An accepted byte count is at least one byte.
// Seeds: fuzz/corpus/budget_fuzz/.
#include <string_view>

#include "fuzz/fuzz_input.h"
#include "train/parse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  remat::fuzz::expect_result_or_error("parse_bytes", [&] {
    const int64_t bytes = remat::train::parse_bytes(text, "--budget");
    FUZZ_CHECK(bytes >= 1, "'{}' parsed to {} bytes", text, bytes);
  });
  remat::fuzz::expect_result_or_error("parse_integer", [&] {
    const int64_t value = remat::train::parse_integer<int64_t>(text, "step");
    FUZZ_CHECK(std::to_string(value) == text || text.starts_with('0') || text.starts_with("-0"),
               "'{}' parsed to {}", text, value);
  });
  return 0;
}
