// Test support for tests/comm: the communicator of this test run (MPI under
// mpirun, else a single process), with a timeout short enough that a test
// which leaves its peers waiting fails instead of hanging the job.
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace remat::testing {

inline std::shared_ptr<comm::Communicator> test_world() { return comm::world(/*timeout_seconds=*/60); }

}  // namespace remat::testing
