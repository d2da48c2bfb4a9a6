// Test support: naming a plan in a failure message.
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/autograd.h"

namespace remat::testing {

// The positions a plan replays, e.g. " 0 3 7" (" none" if it replays
// nothing): enough to rebuild a failing plan by hand.
inline std::string replayed_positions(const std::vector<Tag>& tags) {
  std::string positions;
  for (size_t v = 0; v < tags.size(); ++v) {
    if (tags[v] == Tag::Recompute) positions += fmt::format(" {}", v);
  }
  return positions.empty() ? " none" : positions;
}

}  // namespace remat::testing
