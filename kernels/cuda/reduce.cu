// Reductions on the GPU; see reduce.h.
//
// How the work is split:
// - sum_to over leading axes, (rows, n) -> (n) with the kept axis contiguous
//   (a bias gradient): reduce.cuh's column_sums (Note [Column sums in
//   chunks]): a block per tile of W consecutive outputs (W = 32, or 16 or 8
//   when there are few outputs), as W columns x 256 / W row slices added in
//   slice order; when the tiles are too few to fill the GPU, the rows are
//   cut into fixed chunks as well (a function of the shape alone), each
//   chunk's sums written to partials and added in chunk order by a second
//   pass.
// - sum_to of everything to one value (a loss's sum): a full sum in two
//   passes. Pass one cuts the input into fixed chunks (at least 8 elements a
//   thread, at most kMaxPartials chunks: a function of the size alone),
//   block b adding chunk b (thread t its elements t, t + 256, ... in order,
//   then a fixed shuffle tree and the warps' sums in warp order,
//   block_sum in reduce.cuh) into partials[b]; pass two, one block, adds
//   the partials the same way, in block order by thread.
// - Any other sum_to with at least 32 inputs an output (trailing axes): a
//   WARP PER OUTPUT, lane l adding inputs l, l + 32, ... in order, then a
//   __shfl_down_sync tree. Fewer: one thread an output, walking its inputs
//   in order.
// - max_along over the last axis (inner == 1): a WARP PER ROW, 8 rows a
//   256-thread block, a grid-stride loop over rows. Lane l scans elements
//   l, l + 32, ... in order keeping its first NaN, else its first maximum;
//   the lanes then exchange (value, index) with a __shfl_xor_sync butterfly,
//   each keeping the winner of: a NaN over a number, the larger number, and
//   on equal values (or two NaNs) the smaller index. That order is total, so
//   every lane ends with the same pair: the CPU's (first NaN, else first
//   maximum). inner > 1: a block per tile of W consecutive outputs of one
//   outer index, split as the column sums above (W columns x 256 / W
//   slices, each slice scanning its share of n in order), the slices'
//   winners taken in slice order by the same total order.
// - squared_norm: kNormBlocks blocks each sum a strided share in double and
//   reduce it in shared memory in a fixed tree (block_squared_norm,
//   reduce.cuh, shared with optim.cu's clip_grads); the host adds the
//   kNormBlocks partials in order.
//
// Why sums repeat bit for bit: which thread adds which elements, in which
// order, and the shape of every combining tree depend only on the shapes,
// never on timing or on which block runs a tile; there are no atomics.
#include "kernels/cuda/reduce.h"

#include <algorithm>
#include <vector>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/reduce.cuh"

namespace remat::kernels::cuda {
namespace {

constexpr int64_t kSumChunkMin = 8 * kThreads;  // a full sum's block takes at least 8 elements a thread
constexpr int64_t kMaxPartials = 1024;          // and there are at most this many blocks
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = kThreads / kWarp;  // rows a block of max_along's warp-per-row kernel
constexpr int64_t kMaxBlocks = 4096;

// Column sums' term for sum_to: element (r, j) of (rows, n) at in[r * row_stride + j].
template <class T>
struct ColumnOf {
  const T* in;
  int64_t row_stride;
  __device__ void operator()(int64_t r, int64_t j, T (&v)[1]) const { v[0] = in[r * row_stride + j]; }
};

// Whether (v, i) beats (best, best_index) for max_along: a NaN over a
// number, the larger number, on equal values or two NaNs the smaller index;
// an index of -1 is no element, beaten by any.
template <class T>
__device__ inline bool beats(T v, int64_t i, T best, int64_t best_index) {
  if (i < 0) return false;
  if (best_index < 0) return true;
  const bool v_nan = isnan(v), best_nan = isnan(best);
  if (v_nan != best_nan) return v_nan;
  if (!v_nan && v != best) return v > best;
  return i < best_index;
}

// max_along for inner == 1: warp w of block b takes rows b * kWarpsPerBlock
// + w, then a grid's worth on (bounds the same for the warp's 32 lanes).
template <class T>
__global__ void max_rows(T* values, int64_t* indices, const T* x, int64_t rows, int64_t n) {
  const int64_t lane = threadIdx.x % kWarp;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock) {
    const T* row = x + r * n;
    T best = T(0);
    int64_t best_index = -1;
    for (int64_t i = lane; i < n; i += kWarp) {
      const T v = row[i];
      if (beats(v, i, best, best_index)) {
        best = v;
        best_index = i;
        if (isnan(v)) break;  // nothing later in this lane beats its first NaN
      }
    }
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      const T v = __shfl_xor_sync(kFullMask, best, offset);
      const int64_t i = __shfl_xor_sync(kFullMask, best_index, offset);
      if (beats(v, i, best, best_index)) {
        best = v;
        best_index = i;
      }
    }
    if (lane == 0) {
      if (values) values[r] = best;
      if (indices) indices[r] = best_index;
    }
  }
}

// max_along for inner > 1, (outer, n, inner) -> (outer, inner): a block per
// tile of `width` consecutive j of one o, as `width` columns x blockDim.x /
// width slices (column_sums' split): slice s scans i = s, s + slices, ... in
// order (first NaN, else first maximum, as a lane of max_rows), then slice 0
// takes the slices' winners by `beats` in slice order. `beats` is a total
// order, so the winner is the CPU's whatever the split.
template <class T>
__global__ void max_columns(T* values, int64_t* indices, const T* x, int64_t outer, int64_t n, int64_t inner,
                            int width) {
  __shared__ T best_share[kThreads];
  __shared__ int64_t index_share[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  const int slices = static_cast<int>(blockDim.x) / width, slice = t / width;
  const int64_t tiles_per_row = (inner + width - 1) / width, tiles = outer * tiles_per_row;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t o = tile / tiles_per_row, j = tile % tiles_per_row * width + t % width;
    T best = T(0);
    int64_t best_index = -1;
    if (j < inner) {
      const T* column = x + o * n * inner + j;
      for (int64_t i = slice; i < n; i += slices) {
        const T v = column[i * inner];
        if (beats(v, i, best, best_index)) {
          best = v;
          best_index = i;
          if (isnan(v)) break;  // nothing later in this slice beats its first NaN
        }
      }
    }
    best_share[t] = best;
    index_share[t] = best_index;
    __syncthreads();
    if (slice == 0 && j < inner) {
      for (int k = 1; k < slices; ++k) {
        if (beats(best_share[t + k * width], index_share[t + k * width], best, best_index)) {
          best = best_share[t + k * width];
          best_index = index_share[t + k * width];
        }
      }
      if (values) values[o * inner + j] = best;
      if (indices) indices[o * inner + j] = best_index;
    }
    __syncthreads();  // the next tile writes the shares again
  }
}

template <class T>
__global__ void squared_norm_partials(double* partials, const T* x, int64_t n) {
  const double sum = block_squared_norm<T>(x, n, static_cast<int>(blockIdx.x));
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// A full sum's first pass: block b adds the elements [b chunk, (b + 1) chunk)
// of `walk` (the reduced axes, in row-major order), thread t those at t,
// t + blockDim.x, ... of the chunk in order, then block_sum's fixed tree.
template <class T>
__global__ void sum_partials(T* partials, const T* in, StridedArgs<1> walk, int64_t n, int64_t chunk) {
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * chunk;
  const int64_t end = begin + chunk < n ? begin + chunk : n;
  T acc = T(0);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc += in[offsets_of(walk, i).at[0]];
  const T sum = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// The second pass, one block: thread t adds partials t, t + blockDim.x, ...
// in block order, then the same fixed tree; out (1).
template <class T>
__global__ void sum_of_partials(T* out, const T* partials, int64_t count) {
  T acc = T(0);
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  const T sum = block_sum(acc);
  if (threadIdx.x == 0) out[0] = sum;
}

// sum_to with kept axes and at least a warp's worth of reduced elements an
// output (other than column sums): a warp per output, warp w of block b
// taking outputs b * kWarpsPerBlock + w, then a grid's worth on (bounds the
// same for the warp's 32 lanes). Lane l adds reduced elements l, l + 32, ...
// in order, then a __shfl_down_sync tree; lane 0 writes.
template <class T>
__global__ void sum_warp_per_output(T* out, const T* in, StridedArgs<1> kept, StridedArgs<1> reduced, int64_t outputs,
                                    int64_t count) {
  const int64_t lane = threadIdx.x % kWarp;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp; o < outputs;
       o += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock) {
    const int64_t base = offsets_of(kept, o).at[0];
    T acc = T(0);
    for (int64_t r = lane; r < count; r += kWarp) acc += in[base + offsets_of(reduced, r).at[0]];
    for (int offset = kWarp / 2; offset > 0; offset /= 2) acc += __shfl_down_sync(kFullMask, acc, offset);
    if (lane == 0) out[o] = acc;
  }
}

}  // namespace

template <class T>
void sum_to(T* out, int64_t out_numel, const T* in, const std::vector<int64_t>& in_strides,
            const std::vector<int64_t>& out_strides, const std::vector<int64_t>& shape, Stream stream) {
  // Kept axes (out_strides != 0) first, then the reduced ones: thread o
  // walks every reduced index r in order and adds in[o, r].
  std::vector<int64_t> order_shape, kept_in, reduced_shape, reduced_in;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (out_strides[d] != 0) {
      order_shape.push_back(shape[d]);
      kept_in.push_back(in_strides[d]);
    } else {
      reduced_shape.push_back(shape[d]);
      reduced_in.push_back(in_strides[d]);
    }
  }
  const StridedArgs<1> kept = strided_args<1>(order_shape, {&kept_in});
  const StridedArgs<1> reduced = strided_args<1>(reduced_shape, {&reduced_in});
  const int64_t reduced_count = numel_of(reduced_shape);
  if (out_numel == 0) return;
  // (rows, n) -> (n), the kept axes one contiguous run: columns of a matrix.
  if (kept.rank == 1 && kept.strides[0][0] == 1 && reduced.rank == 1) {
    column_sums<T, 1>({"sum_to_column_sums", "sum_to_column_chunks"}, {out}, reduced.shape[0], kept.shape[0],
                      ColumnOf<T>{in, reduced.strides[0][0]}, stream);
    return;
  }
  // Everything to one value: fixed chunks, then their partials (see the top).
  if (out_numel == 1 && reduced_count > 0) {
    int64_t chunk = (reduced_count + kMaxPartials - 1) / kMaxPartials;
    chunk = std::max(kSumChunkMin, (chunk + kThreads - 1) / kThreads * kThreads);
    const int64_t blocks = (reduced_count + chunk - 1) / chunk;
    const ScratchLease lease = scratch_on(stream, Scratch::SumPartials, static_cast<size_t>(blocks) * sizeof(T));
    T* partials = lease.as<T>();
    launch("sum_to_partials", sum_partials<T>, {static_cast<unsigned>(blocks), kThreads}, stream, partials, in, reduced,
           reduced_count, chunk);
    launch("sum_to_sum_of_partials", sum_of_partials<T>, {1, kThreads}, stream, out,
           static_cast<const T*>(partials), blocks);
    return;
  }
  if (reduced_count >= kWarp) {
    const auto blocks =
        static_cast<unsigned>(std::min((out_numel + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks));
    launch("sum_to_warp_per_output", sum_warp_per_output<T>, {blocks, kThreads}, stream, out, in, kept, reduced,
           out_numel, reduced_count);
    return;
  }
  launch_elementwise(out_numel, stream, [=] __device__(int64_t o) {
    const int64_t base = offsets_of(kept, o).at[0];
    T acc = T(0);
    for (int64_t r = 0; r < reduced_count; ++r) acc += in[base + offsets_of(reduced, r).at[0]];
    out[o] = acc;
  });
}

int64_t column_sum_chunks(int64_t rows, int64_t n) { return column_split(rows, n).chunks; }

template <class T>
void max_along(T* values, int64_t* indices, const T* x, int64_t outer, int64_t n, int64_t inner, Stream stream) {
  if (inner == 1) {
    if (outer == 0) return;
    const auto blocks = static_cast<unsigned>(std::min((outer + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks));
    launch("max_along_rows", max_rows<T>, {blocks, kThreads}, stream, values, indices, x, outer, n);
    return;
  }
  if (outer == 0 || inner == 0 || n == 0) return;
  // Tiles of 32 j (16 or 8 for a narrower inner); fewer threads, down to a
  // warp, where n has fewer elements than the slices.
  int width = 32;
  while (width > 8 && width / 2 >= inner) width /= 2;
  int threads = kThreads;
  while (threads > kWarp && static_cast<int64_t>(threads / width / 2) >= n) threads /= 2;
  const int64_t tiles = outer * ((inner + width - 1) / width);
  launch("max_along_columns", max_columns<T>, {static_cast<unsigned>(std::min(tiles, kMaxBlocks)),
         static_cast<unsigned>(threads)}, stream, values, indices, x, outer, n, inner, width);
}

template <class T>
void max_along_backward(T* dx, const int64_t* indices, const T* dout, int64_t outer, int64_t n, int64_t inner,
                        Stream stream) {
  launch_elementwise(outer * n * inner, stream, [=] __device__(int64_t e) {
    const int64_t j = e % inner, i = e / inner % n, o = e / (inner * n);
    dx[e] = indices[o * inner + j] == i ? dout[o * inner + j] : T(0);
  });
}

template <class T>
double squared_norm(const T* x, int64_t n, Stream stream) {
  if (n == 0) return 0;
  // Kept scratch (launch.cuh): clipping calls this once per parameter, every step.
  const ScratchLease lease = scratch_on(stream, Scratch::SquaredNormPartials, kNormBlocks * sizeof(double));
  double* partials = lease.as<double>();
  launch("squared_norm_partials", squared_norm_partials<T>, {kNormBlocks, kThreads}, stream, partials, x, n);
  double host[kNormBlocks];
  copy_device_to_host(host, partials, sizeof host, stream);
  double sum = 0;
  for (double partial : host) sum += partial;
  return sum;
}

#define REMAT_INSTANTIATE_REDUCE(T)                                                                          \
  template void sum_to<T>(T*, int64_t, const T*, const std::vector<int64_t>&, const std::vector<int64_t>&,   \
                          const std::vector<int64_t>&, Stream);                                              \
  template void max_along<T>(T*, int64_t*, const T*, int64_t, int64_t, int64_t, Stream);                     \
  template void max_along_backward<T>(T*, const int64_t*, const T*, int64_t, int64_t, int64_t, Stream);      \
  template double squared_norm<T>(const T*, int64_t, Stream);
REMAT_INSTANTIATE_REDUCE(float)
REMAT_INSTANTIATE_REDUCE(double)
#undef REMAT_INSTANTIATE_REDUCE

}  // namespace remat::kernels::cuda
