// The settings that all ranks share; see rank_agreement.h.
#include "train/rank_agreement.h"

#include <fmt/ranges.h>

#include "engine/error.h"
#include "engine/hash.h"

namespace remat::train {
namespace {

// Every rank's `mine` (the same count on each), in rank order.
std::vector<int64_t> gather(comm::Communicator& communicator, const std::vector<int64_t>& mine) {
  std::vector<int64_t> all(mine.size() * static_cast<size_t>(communicator.world_size()));
  communicator.allgather(mine.data(), all.data(), static_cast<int64_t>(mine.size()), DType::Int64);
  return all;
}

}  // namespace

void check_ranks_agree(comm::Communicator& communicator, const std::vector<Setting>& settings, std::string_view what) {
  const size_t world = static_cast<size_t>(communicator.world_size()), n = settings.size();
  if (world == 1 || n == 0) return;
  std::vector<int64_t> hashes;
  for (const Setting& s : settings) {
    hashes.push_back(static_cast<int64_t>(fnv1a(s.name + '\0' + s.value)));
  }
  const std::vector<int64_t> all = gather(communicator, hashes);
  std::vector<size_t> differing;
  for (size_t i = 0; i < n; ++i) {
    for (size_t r = 1; r < world; ++r) {
      if (all[r * n + i] != all[i]) {
        differing.push_back(i);
        break;
      }
    }
  }
  if (differing.empty()) return;

  // Every rank saw the same hashes, so every rank is here: gather the values
  // of the settings that differ (their lengths, then their bytes padded to
  // the longest), one int64 per byte; they are short.
  std::vector<int64_t> lengths;
  std::string bytes;
  for (size_t i : differing) {
    lengths.push_back(static_cast<int64_t>(settings[i].value.size()));
    bytes += settings[i].value;
  }
  const std::vector<int64_t> all_lengths = gather(communicator, lengths);
  int64_t longest = 0;
  for (size_t r = 0; r < world; ++r) {
    int64_t total = 0;
    for (size_t k = 0; k < differing.size(); ++k) total += all_lengths[r * differing.size() + k];
    longest = std::max(longest, total);
  }
  std::vector<int64_t> padded(static_cast<size_t>(longest), 0);
  for (size_t b = 0; b < bytes.size(); ++b) padded[b] = static_cast<unsigned char>(bytes[b]);
  const std::vector<int64_t> all_bytes = gather(communicator, padded);

  std::vector<std::string> lines;
  for (size_t k = 0; k < differing.size(); ++k) {
    std::vector<std::string> values;
    for (size_t r = 0; r < world; ++r) {
      size_t begin = r * static_cast<size_t>(longest);
      for (size_t j = 0; j < k; ++j) begin += static_cast<size_t>(all_lengths[r * differing.size() + j]);
      std::string value;
      for (int64_t c = 0; c < all_lengths[r * differing.size() + k]; ++c) {
        value += static_cast<char>(all_bytes[begin + static_cast<size_t>(c)]);
      }
      values.push_back(fmt::format("rank {} has {}", r, value.empty() ? "''" : value));
    }
    lines.push_back(fmt::format("{}: {}", settings[differing[k]].name, fmt::join(values, ", ")));
  }
  REMAT_FAIL("{}: the ranks were given different settings, which must be the same on every rank: {}", what,
             fmt::join(lines, "; "));
}

}  // namespace remat::train
