// The settings that every rank of a job must share, checked at the start of a
// run: ranks given different --max-steps hung at the end of the shorter one,
// and different --batch-size or --gradient-accumulation-steps trained on
// silently. One allgather of a 64-bit hash per setting; only when some differ
// do two more carry the values, so that every rank's error names the setting
// and each rank's value. Called by the training tasks.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"

namespace remat::train {

struct Setting {
  std::string name;   // as the user gave it: "--max-steps"
  std::string value;  // as text: "10"
};

// Errors on every rank at once, "train: the ranks were given different
// settings: --max-steps: rank 0 has 10, rank 1 has 20", when any setting's
// value differs between the ranks. Every rank must pass the same names in the
// same order (the same program does). Nothing to do for one process.
void check_ranks_agree(comm::Communicator& communicator, const std::vector<Setting>& settings, std::string_view what);

}  // namespace remat::train
