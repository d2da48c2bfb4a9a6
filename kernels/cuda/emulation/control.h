// What a test or a user sets on remat's emulated GPU (REMAT_CUDA_EMULATION
// builds only). The environment sets the same at start-up:
//   REMAT_EMULATION_ORDER=in-order|shuffled|shuffled:SEED  the order a block's threads start and resume in
//   REMAT_EMULATED_GPUS=1                                  devices reported, 0 to 8 (0: a machine without a GPU)
//   REMAT_EMULATED_GPU_MEMORY=16GiB                        the device's memory
#pragma once

#include <cstddef>
#include <cstdint>

namespace remat_emulation {

// InOrder: threads start in order of their index, and released threads
// resume in the order they arrived. Shuffled: both in a random order, drawn
// again for every block from `seed` (fixed per grid, so a run repeats), so
// that a kernel that leans on an order no GPU promises (a missing barrier)
// gives a different answer.
enum class ThreadOrder { InOrder, Shuffled };
void set_thread_order(ThreadOrder order, uint64_t seed = 1);
ThreadOrder thread_order();

// Device memory in use now and at most since the last reset, in bytes as
// asked for (without the emulator's red zones).
struct MemoryUse {
  size_t in_use = 0;
  size_t peak = 0;
  size_t limit = 0;
};
MemoryUse memory_use();

// Grids run and emulated threads started since the process began.
struct Counters {
  uint64_t grids = 0;
  uint64_t blocks = 0;
};
Counters counters();

}  // namespace remat_emulation
