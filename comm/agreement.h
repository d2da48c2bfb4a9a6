// The argument check that Mpi and Nccl run before every collective: each
// rank contributes (collective, element count, dtype, op or root), one
// allreduce with MAX over (v, -v) gives every field's range over the ranks,
// and a range wider than one value is a CommError on every rank at once,
// naming it. So a rank that passes another size fails cleanly instead of
// corrupting memory or hanging, and the communicator stays usable.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "engine/dtype.h"

namespace remat::comm {

enum class Collective { Allreduce, Broadcast, Allgather, Barrier };
std::string_view collective_name(Collective kind);

struct CallArguments {
  Collective kind;
  int64_t count;
  DType dtype;
  int64_t detail;  // the reduce op, or the broadcast's root
};

// What this rank puts into the MAX-allreduce: the four fields and their negatives.
std::array<int64_t, 8> encode_for_max(const CallArguments& mine);
// Throws CommError ("<backend>: allreduce with different element counts
// across ranks: from 10 to 13 (rank 0 has 10)") when `maxima`, the reduced
// encoding, shows that the ranks disagree.
void check_agreement(std::string_view backend, const std::array<int64_t, 8>& maxima, const CallArguments& mine,
                     int rank);

}  // namespace remat::comm
