// Limits of every command; see limits.h.
#include "train/limits.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "engine/allocator.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "kernels/cpu/parallel.h"

namespace remat::train {

// Never above the kernels' own bound (kernels/cpu/parallel.h).
int max_threads() {
  return std::min(kernels::cpu::kMaxThreads, std::max(16, 4 * static_cast<int>(std::thread::hardware_concurrency())));
}

Device check_device(const std::string& name, std::string_view what) {
  const Device device = device_from_name(name);
  REMAT_CHECK(!device.is_meta(), "{}: --device meta holds no values to train", what);
  if (device.is_cuda()) allocator_for(device);  // an error naming the GPUs there are
  return device;
}

void check_threads(int threads, std::string_view what) {
  const int most = max_threads();
  REMAT_CHECK(threads >= 1 && threads <= most, "{}: --threads must be between 1 and {} (4 x the {} hardware threads "
              "of this machine, at least 16; more only compete for the same cores), got {}", what, most,
              std::thread::hardware_concurrency(), threads);
}

void check_distribution(int64_t gradient_accumulation_steps, int64_t local_sgd_steps,
                        const std::optional<comm::DiLoCoOptions>& diloco) {
  REMAT_CHECK(gradient_accumulation_steps >= 1, "train: --gradient-accumulation-steps must be at least 1, got {}",
              gradient_accumulation_steps);
  REMAT_CHECK(local_sgd_steps >= 0, "train: --local-sgd-steps must be >= 0, got {}", local_sgd_steps);
  if (!diloco) return;
  REMAT_CHECK(local_sgd_steps > 0, "train: DiLoCo needs --local-sgd-steps H > 0");
  REMAT_CHECK(std::isfinite(diloco->outer_lr) && diloco->outer_lr > 0, "train: --outer-lr must be > 0, got {}",
              diloco->outer_lr);
  REMAT_CHECK(diloco->momentum >= 0 && diloco->momentum < 1, "train: --outer-momentum must be in [0, 1), got {}",
              diloco->momentum);
}

}  // namespace remat::train
