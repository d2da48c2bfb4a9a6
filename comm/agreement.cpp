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

AgreementValues encode_for_max(const CallArguments& mine) {
  const std::array<int64_t, kAgreementFields> fields{static_cast<int64_t>(mine.kind), mine.count,
                                                     static_cast<int64_t>(mine.dtype), mine.detail,
                                                     mine.valid ? 1 : 0};
  AgreementValues encoded{};
  for (size_t i = 0; i < kAgreementFields; ++i) {
    encoded[i] = fields[i];
    encoded[i + kAgreementFields] = -fields[i];
  }
  return encoded;
}

std::string check_name(const AgreementValues& mine) {
  return fmt::format("{} (the check that all ranks make the same call)", name_of(mine[0]));
}

void check_agreement(std::string_view backend, const AgreementValues& maxima, const CallArguments& mine, int rank) {
  const auto low = [&](size_t i) { return -maxima[i + kAgreementFields]; };
  const auto high = [&](size_t i) { return maxima[i]; };
  const std::string_view what = collective_name(mine.kind);
  if (low(4) == 0) {
    throw CommError(fmt::format("{}: another rank's arguments to {} were invalid (its own error says how); no data "
                                "moved", backend, what));
  }
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
