// Column sums over blocks of rows fixed by the shape: how a CPU kernel that
// walks the rows of a (rows, C) array and sums per channel over them
// (layer_norm's dweight and dbias, rms_norm's dweight) splits that work
// over threads and still gives the same bits at any thread count. Not a
// kernel: kernels/cpu/layer_norm.cpp and rms_norm.cpp call it, and their
// ops size the scratch with row_block_count and row_block_scratch.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/parallel.h"

namespace remat::kernels::cpu {

// Note [Row blocks fixed by the shape]
// A column sum split over threads, a partial row each, adds its rows in an
// order the split decides: with the split the thread count's, so were the
// bits (W2's weights at 1 and 2 threads differed through layer_norm's
// dweight and dbias). The blocks here come from rows and C alone: about
// kParallelGrain elements each, at most kMaxRowBlocks; each block sums its
// rows in order into a partial row of its own, threads take whole blocks,
// and the partials are added in block order at the end. One thread runs
// the same blocks, so it gives the same bits as any other count.
inline constexpr int64_t kMaxRowBlocks = 64;

// The blocks of rows a (rows, C) array's column sums go through: 1 (sum
// straight into the output) below 2 * kParallelGrain elements.
inline int64_t row_block_count(int64_t rows, int64_t channels) {
  if (rows * channels < 2 * kParallelGrain) return 1;
  const int64_t wanted = (rows * channels + kParallelGrain - 1) / kParallelGrain;
  return std::clamp<int64_t>(wanted, 1, std::min(rows, kMaxRowBlocks));
}

// The scratch elements `sums` column sums over `blocks` need: a partial row
// per block and sum, (blocks, sums, C), or 0 for one block.
inline int64_t row_block_scratch(int64_t blocks, int64_t sums, int64_t channels) {
  return blocks > 1 ? blocks * sums * channels : 0;
}

// out[k] (C) = the column sums that rows(parts, begin, end) adds into
// parts[k] (C) for rows [begin, end), by `blocks` blocks of rows (from
// row_block_count) with their partials in scratch (row_block_scratch
// elements); rows also writes whatever else a row makes (dx). A null out[k]
// is not wanted, and rows gets a null part for it. With one block, rows
// adds straight into out, which is zeroed first.
template <size_t K, class T, class Rows>
void sum_over_row_blocks(const std::array<T*, K>& out, T* scratch, int64_t rows, int64_t channels, int64_t blocks,
                         Rows&& rows_of) {
  for (T* o : out) {
    if (o) std::fill(o, o + channels, T(0));
  }
  if (blocks <= 1) return rows_of(out, int64_t{0}, rows);
  const bool sums = std::any_of(out.begin(), out.end(), [](T* o) { return o != nullptr; });
  if (sums) std::fill(scratch, scratch + row_block_scratch(blocks, K, channels), T(0));
  const int64_t block_rows = (rows + blocks - 1) / blocks;
#pragma omp parallel for schedule(static) if (num_threads() > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    std::array<T*, K> parts{};  // block b's partial rows, (K, C)
    for (size_t k = 0; k < K; ++k) {
      if (out[k]) parts[k] = scratch + (b * static_cast<int64_t>(K) + static_cast<int64_t>(k)) * channels;
    }
    rows_of(parts, std::min(rows, b * block_rows), std::min(rows, (b + 1) * block_rows));
  }
  for (int64_t b = 0; b < blocks; ++b) {  // in block order: the same bits from run to run
    for (size_t k = 0; k < K; ++k) {
      if (!out[k]) continue;
      T* o = out[k];
      const T* part = scratch + (b * static_cast<int64_t>(K) + static_cast<int64_t>(k)) * channels;
#pragma omp simd
      for (int64_t j = 0; j < channels; ++j) o[j] += part[j];
    }
  }
}

}  // namespace remat::kernels::cpu
