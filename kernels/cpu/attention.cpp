// The causal softmax on the CPU; see attention.h.
//
// Bit for bit masked_fill + softmax, on every compiler and at every
// optimisation level: GPT's losses and gradients did not move when
// attention switched to this op. softmax_forward sums exp(x - m) in one
// `omp simd` reduction over the whole row, in vector lanes; a masked column
// adds exp(-inf) = 0 to its lane. A loop over the prefix alone splits the
// elements among the lanes otherwise (another trip count, another remainder
// loop), and even a loop over the whole row with the mask as a select in it
// was vectorised otherwise by GCC at -O3 and by clang: the sums rounded
// differently. So this runs softmax.cpp's own kernels, on rows masked in
// place: a chunk of rows of at most kChunk elements (in cache) is written
// to out with -inf after each prefix, then softmax_forward runs over it in
// place; backward is softmax_backward, then 0 after each prefix (the
// masked_fill's backward). What goes is the mask tensor, its reads, a
// (B, H, T, T) tensor and a node; the GPU's kernel (attention.cu) reads
// only the prefixes.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <limits>

#include "kernels/cpu/softmax.h"

namespace remat::kernels::cpu {
namespace {

constexpr int64_t kChunk = 16384;  // elements: 64 KB of float32, in L2 between the two passes

// Runs body(first_row, count) over (rows, n) in chunks of whole rows, each
// fewer than the 65536 elements from which softmax's kernels start threads
// of their own (but for a row longer than that).
template <class Body>
void for_each_chunk(int64_t rows, int64_t n, Body body) {
  const int64_t per_chunk = std::max<int64_t>(1, kChunk / std::max<int64_t>(n, 1));
  const int64_t chunks = (rows + per_chunk - 1) / per_chunk;
#pragma omp parallel for schedule(static) if (rows * n >= 65536)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t first = c * per_chunk;
    body(first, std::min(per_chunk, rows - first));
  }
}

}  // namespace

template <class T> void causal_softmax_forward(T* out, const T* x, int64_t rows, int64_t n, Host) {
  constexpr T kMasked = -std::numeric_limits<T>::infinity();
  for_each_chunk(rows, n, [&](int64_t first, int64_t count) {
    for (int64_t r = first; r < first + count; ++r) {
      const int64_t p = r % n + 1;  // row i = p - 1 sees columns 0..i
      const T* xr = x + r * n;      // (n)
      T* orow = out + r * n;        // (n)
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) orow[j] = j < p ? xr[j] : kMasked;  // xr[j] read before orow[j] is written
    }
    softmax_forward(out + first * n, out + first * n, count, n, 1);  // exp(-inf - m) = 0 after the prefix
  });
}

// y = softmax(x) on the prefix: dx_j = y_j (dy_j - sum_{k <= i} dy_k y_k), 0 after it.
// softmax_backward's dot product also runs over the row after the prefix,
// where y = 0 adds dy * 0 = +-0, changing no sum (for finite dy, as in GPT).
template <class T> void causal_softmax_backward(T* dx, const T* dout, const T* out, int64_t rows, int64_t n, Host) {
  for_each_chunk(rows, n, [&](int64_t first, int64_t count) {
    softmax_backward(dx + first * n, dout + first * n, out + first * n, count, n, 1);
    for (int64_t r = first; r < first + count; ++r) {
      const int64_t p = r % n + 1;
      std::fill(dx + r * n + p, dx + (r + 1) * n, T(0));
    }
  });
}

#define REMAT_INSTANTIATE_CAUSAL_SOFTMAX(T)                                        \
  template void causal_softmax_forward<T>(T*, const T*, int64_t, int64_t, Host); \
  template void causal_softmax_backward<T>(T*, const T*, const T*, int64_t, int64_t, Host);
REMAT_INSTANTIATE_CAUSAL_SOFTMAX(float)
REMAT_INSTANTIATE_CAUSAL_SOFTMAX(double)
#undef REMAT_INSTANTIATE_CAUSAL_SOFTMAX

}  // namespace remat::kernels::cpu
