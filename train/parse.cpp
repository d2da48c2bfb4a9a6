// parse_bytes; see parse.h.
#include "train/parse.h"

#include <array>
#include <cmath>
#include <limits>
#include <utility>

namespace remat::train {

int64_t parse_bytes(std::string_view text, std::string_view what) {
  constexpr std::array<std::pair<std::string_view, double>, 4> kUnits{
      {{"GiB", 1024.0 * 1024 * 1024}, {"MiB", 1024.0 * 1024}, {"KiB", 1024.0}, {"B", 1.0}}};
  double scale = 1.0;
  std::string_view number = text;
  for (const auto& [unit, factor] : kUnits) {
    if (number.size() > unit.size() && number.ends_with(unit)) {
      number.remove_suffix(unit.size());
      scale = factor;
      break;
    }
  }
  double value = 0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
  REMAT_CHECK(error == std::errc() && end == number.data() + number.size() && value > 0 && std::isfinite(value),
              "{}: '{}' is not a positive byte count (examples: 4096, 512KiB, 64MiB, 1.5GiB)", what, text);
  // llround of a value beyond int64 is unspecified (it gave INT64_MIN), so the
  // range is checked in double first: 2^63 is exact there, INT64_MAX is not.
  const double bytes = value * scale;
  REMAT_CHECK(bytes < 0x1p63, "{}: '{}' is more than the largest byte count, {} (8 EiB)", what, text,
              std::numeric_limits<int64_t>::max());
  const int64_t rounded = std::llround(bytes);
  REMAT_CHECK(rounded >= 1, "{}: '{}' is less than one byte (it rounds to 0)", what, text);
  return rounded;
}

}  // namespace remat::train
