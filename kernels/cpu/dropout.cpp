// Dropout kernels; see dropout.h. Work is split in groups of 4 elements (one
// Philox call each), so every element reads the same word whatever the
// number of threads: the mask depends only on (seed, offset, i).
#include "kernels/cpu/dropout.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"
#include "kernels/math.h"

namespace remat::kernels::cpu {
namespace {

// out[i] = keep(i) ? x[i] * scale : 0; forward and backward are this same map.
template <class T>
void apply_mask(T* out, const T* x, int64_t n, const DropoutMask& mask, T scale) {
  const int64_t groups = (n + 3) / 4;
  auto run = [&](int64_t begin, int64_t end) {  // groups [begin, end)
    for (int64_t g = begin; g < end; ++g) {
      const Words4 words = philox4x32(mask.seed, mask.offset + static_cast<uint64_t>(g));
      const int64_t first = 4 * g, count = std::min<int64_t>(4, n - first);
      for (int64_t j = 0; j < count; ++j) {
        out[first + j] = dropout_keeps(words.w[j], mask.threshold) ? x[first + j] * scale : T(0);
      }
    }
  };
  constexpr int64_t kGroupGrain = kParallelGrain / 4;
  if (groups < 2 * kGroupGrain || num_threads() == 1) return run(0, groups);
  const int64_t chunks = (groups + kGroupGrain - 1) / kGroupGrain;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) run(c * kGroupGrain, std::min(groups, (c + 1) * kGroupGrain));
}

}  // namespace

template <class T> void dropout_forward(T* out, const T* x, int64_t n, const DropoutMask& mask, T scale, Host) {
  apply_mask(out, x, n, mask, scale);
}
template <class T> void dropout_backward(T* dx, const T* dout, int64_t n, const DropoutMask& mask, T scale, Host) {
  apply_mask(dx, dout, n, mask, scale);
}

template void dropout_forward<float>(float*, const float*, int64_t, const DropoutMask&, float, Host);
template void dropout_forward<double>(double*, const double*, int64_t, const DropoutMask&, double, Host);
template void dropout_backward<float>(float*, const float*, int64_t, const DropoutMask&, float, Host);
template void dropout_backward<double>(double*, const double*, int64_t, const DropoutMask&, double, Host);

}  // namespace remat::kernels::cpu
