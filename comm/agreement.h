// The argument check that every collective starts with (Communicator::agree):
// each rank contributes (collective, element count, dtype, op or root, and
// whether its own arguments are valid), one MAX-allreduce over (v, -v) gives
// every field's range over the ranks, and a range wider than one value is a
// CommError on every rank at once, naming it. So a rank that passes another
// size, or a tensor it cannot send, fails cleanly on every rank instead of
// corrupting memory or leaving its peers waiting, and the communicator stays
// usable.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/dtype.h"

namespace remat::comm {

enum class Collective { Allreduce, Broadcast, Allgather, Barrier };
std::string_view collective_name(Collective kind);

struct CallArguments {
  Collective kind;
  int64_t count;
  DType dtype;
  int64_t detail;     // the reduce op, or the broadcast's root
  bool valid = true;  // this rank's own check of its arguments passed
};

inline constexpr size_t kAgreementFields = 5;
using AgreementValues = std::array<int64_t, 2 * kAgreementFields>;

// What this rank puts into the MAX-allreduce: the fields and their negatives.
AgreementValues encode_for_max(const CallArguments& mine);
// "allreduce (the check that all ranks make the same call)", for the
// messages of a check that times out; `mine` as encode_for_max gave it.
std::string check_name(const AgreementValues& mine);
// Throws CommError ("<backend>: allreduce with different element counts
// across ranks: from 10 to 13 (rank 0 has 10)") when `maxima`, the reduced
// encoding, shows that the ranks disagree or that some rank's arguments
// were invalid.
void check_agreement(std::string_view backend, const AgreementValues& maxima, const CallArguments& mine, int rank);

}  // namespace remat::comm
