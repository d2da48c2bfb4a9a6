// parse_bytes; see parse.h.
#include "train/parse.h"

#include <array>
#include <cmath>
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
  return static_cast<int64_t>(std::llround(value * scale));
}

}  // namespace remat::train
