// Embedding kernels; see embedding.h. Both run over rows of C channels.
// Forward rows are independent and split across threads; backward rows may
// collide (repeated ids), so threads split the channels instead and each
// thread adds its columns in the order of the ids: the result does not
// depend on the number of threads.
#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/parallel.h"

namespace remat::kernels::cpu {

namespace {

// The position of the first id outside [0, vocab), or -1.
int64_t first_bad_id(const int64_t* ids, int64_t n, int64_t vocab) {
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) return i;
  }
  return -1;
}

}  // namespace

template <class T>
int64_t embedding_forward(T* out, const T* weight, const int64_t* ids, int64_t n, int64_t channels, int64_t vocab, Host) {
  if (const int64_t bad = first_bad_id(ids, n, vocab); bad >= 0) return bad;
  const size_t row_bytes = static_cast<size_t>(channels) * sizeof(T);
  // out (n, C), weight (V, C)
#pragma omp parallel for schedule(static) if (n * channels >= 2 * kParallelGrain && num_threads() > 1)
  for (int64_t i = 0; i < n; ++i) std::memcpy(out + i * channels, weight + ids[i] * channels, row_bytes);
  return -1;
}

template <class T>
int64_t embedding_backward(T* dweight, const T* dout, const int64_t* ids, int64_t n, int64_t channels, int64_t vocab,
                           Host) {
  // The ids forward accepted may have been written since: a bad one would
  // write outside dweight.
  if (const int64_t bad = first_bad_id(ids, n, vocab); bad >= 0) return bad;
  // dweight (V, C), dout (n, C)
  std::fill(dweight, dweight + vocab * channels, T(0));
  constexpr int64_t kBlock = 64;  // channels per task
  const int64_t blocks = (channels + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n * channels >= 2 * kParallelGrain && blocks > 1 && num_threads() > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kBlock, end = std::min(channels, begin + kBlock);
    for (int64_t i = 0; i < n; ++i) {
      T* d = dweight + ids[i] * channels;
      const T* g = dout + i * channels;
#pragma omp simd
      for (int64_t c = begin; c < end; ++c) d[c] += g[c];
    }
  }
  return -1;
}

#define REMAT_INSTANTIATE_EMBEDDING(T)                                                              \
  template int64_t embedding_forward<T>(T*, const T*, const int64_t*, int64_t, int64_t, int64_t, Host); \
  template int64_t embedding_backward<T>(T*, const T*, const int64_t*, int64_t, int64_t, int64_t, Host);

REMAT_INSTANTIATE_EMBEDDING(float)
REMAT_INSTANTIATE_EMBEDDING(double)

}  // namespace remat::kernels::cpu
