// The argument check of collectives; see agreement.h.
#include "comm/agreement.h"

#include "comm/communicator.h"

namespace remat::comm {
namespace {

std::string_view name_of(int64_t kind) {
  return kind >= 0 && kind <= static_cast<int64_t>(Collective::Barrier) ? collective_name(static_cast<Collective>(kind))
                                                                        : "?";
}

}  // namespace

std::string_view collective_name(Collective kind) {
  switch (kind) {
    case Collective::Allreduce: return "allreduce";
    case Collective::Broadcast: return "broadcast";
    case Collective::Allgather: return "allgather";
    case Collective::Barrier: return "barrier";
  }
  return "?";
}

std::array<int64_t, 8> encode_for_max(const CallArguments& mine) {
  const std::array<int64_t, 4> fields{static_cast<int64_t>(mine.kind), mine.count, static_cast<int64_t>(mine.dtype),
                                      mine.detail};
  std::array<int64_t, 8> encoded{};
  for (size_t i = 0; i < 4; ++i) {
    encoded[i] = fields[i];
    encoded[i + 4] = -fields[i];
  }
  return encoded;
}

void check_agreement(std::string_view backend, const std::array<int64_t, 8>& maxima, const CallArguments& mine,
                     int rank) {
  const auto low = [&](size_t i) { return -maxima[i + 4]; };
  const auto high = [&](size_t i) { return maxima[i]; };
  const std::string_view what = collective_name(mine.kind);
  if (low(0) != high(0)) {
    throw CommError(fmt::format("{}: ranks call different collectives at once: rank {} calls {}, others {} to {}",
                                backend, rank, what, name_of(low(0)), name_of(high(0))));
  }
  if (low(1) != high(1)) {
    throw CommError(fmt::format("{}: {} with different element counts across ranks: from {} to {} (rank {} has {})",
                                backend, what, low(1), high(1), rank, mine.count));
  }
  if (low(2) != high(2)) {
    throw CommError(fmt::format("{}: {} with different dtypes across ranks (rank {} has {})", backend, what, rank,
                                dtype_name(mine.dtype)));
  }
  if (low(3) != high(3)) {
    throw CommError(fmt::format("{}: {} with a different {} across ranks (rank {} has {})", backend, what,
                                mine.kind == Collective::Broadcast ? "root" : "reduce op", rank, mine.detail));
  }
}

}  // namespace remat::comm
