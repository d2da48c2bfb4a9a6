// Limits of every command; see limits.h.
#include "train/limits.h"

#include <algorithm>
#include <thread>

#include "engine/error.h"
#include "kernels/cpu/parallel.h"

namespace remat::train {

// Never above the kernels' own bound (kernels/cpu/parallel.h).
int max_threads() {
  return std::min(kernels::cpu::kMaxThreads, std::max(16, 4 * static_cast<int>(std::thread::hardware_concurrency())));
}

void check_threads(int threads, std::string_view what) {
  const int most = max_threads();
  REMAT_CHECK(threads >= 1 && threads <= most, "{}: --threads must be between 1 and {} (4 x the {} hardware threads "
              "of this machine, at least 16; more only compete for the same cores), got {}", what, most,
              std::thread::hardware_concurrency(), threads);
}

}  // namespace remat::train
