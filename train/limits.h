// Limits that hold for every command: the thread count. Checked where a run
// sets its threads (the tasks, the workloads), so that a bad value is an
// error naming it instead of a crash inside the OpenMP runtime (100000
// threads segfaulted in libgomp, 40000 failed to create threads).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "comm/averaging.h"
#include "engine/device.h"

namespace remat::train {

// The most threads a run may ask for: 4 x this machine's hardware threads
// (at least 16). More only compete for the same cores.
int max_threads();

// Errors unless 1 <= threads <= max_threads(); `what` names the command
// ("train", "bench") for the message.
void check_threads(int threads, std::string_view what);
// The device named by --device, checked before any work: a known name, not
// meta (it holds no values to train), and a GPU this process has.
Device check_device(const std::string& name, std::string_view what);

// The distribution flags both tasks take: micro-batches per step >= 1,
// LocalSGD's H >= 0, and DiLoCo (which needs H > 0) with an outer lr > 0
// and momentum in [0, 1).
void check_distribution(int64_t gradient_accumulation_steps, int64_t local_sgd_steps,
                        const std::optional<comm::DiLoCoOptions>& diloco);

}  // namespace remat::train
