// Strided copies on the GPU; see copy.h. Elements move as integers of
// their size (1, 2, 4 or 8 bytes); the path is strided_copy_path's, on the
// axes strided_args leaves after merging:
// - both sides contiguous: one device-to-device cudaMemcpyAsync (the copy
//   engine's, no kernel);
// - one or two axes (a transpose of two, a slice of rows): map_rows
//   (elementwise.cuh: no index division, 16-byte moves where aligned);
// - three or more (attention's heads: (B, T, H, D) <-> (B, H, T, D)):
//   copy_rows_kernel below, the last axis as rows, no index divided per
//   element (Note [Copies of three or more axes]).
#include "kernels/cuda/copy.h"

#include <atomic>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/shapes.h"

namespace remat::kernels::cuda {
namespace {

// Note [Copies of three or more axes]: every axis but the last is a row
// index r (rows = their product), the last the columns. A block takes
// blockDim.x / lanes rows a pass, `lanes` threads a row (a power of two
// covering the row's work items, at most kThreads). Thread s of the block
// finds row first + s's two offsets from r, dividing by each outer axis
// (rank - 2 divisions a row, not an element), and leaves them in shared
// memory; after a barrier the row's lanes move its columns: 16-byte packs
// where both sides step by 1 along a row and every row starts 16-byte
// aligned (Note [Vector loads]), then the last cols % W elements one at a
// time; else an element at a time, still no division. At W3's head merge,
// (8, 1024, 12, 64) float, a row is 64 floats: 16 lanes of one 16-byte
// pack, 16 rows a block, two index divisions per 256 bytes moved.
template <class E>
__global__ void copy_rows_kernel(E* dst, const E* src, StridedArgs<2> args, int64_t rows, int lanes, bool vector) {
  constexpr int W = kPackWidth<E>;
  __shared__ int64_t row_at[2][kThreads];  // (dst, src) offsets of this pass's rows
  const int last = args.rank - 1;
  const int64_t cols = args.shape[last], dst_col = args.strides[0][last], src_col = args.strides[1][last];
  const int t = static_cast<int>(threadIdx.x), per_pass = static_cast<int>(blockDim.x) / lanes;
  const int slot = t / lanes, lane = t % lanes;
  // Pass bounds are the same for the whole block: every thread reaches every barrier.
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * per_pass; first < rows;
       first += static_cast<int64_t>(gridDim.x) * per_pass) {
    if (t < per_pass && first + t < rows) {
      int64_t r = first + t, at_dst = 0, at_src = 0;
      for (int d = last - 1; d > 0; --d) {
        const int64_t i = r % args.shape[d];
        r /= args.shape[d];
        at_dst += i * args.strides[0][d];
        at_src += i * args.strides[1][d];
      }
      row_at[0][t] = at_dst + r * args.strides[0][0];
      row_at[1][t] = at_src + r * args.strides[1][0];
    }
    __syncthreads();
    if (first + slot < rows) {
      E* d = dst + row_at[0][slot];
      const E* s = src + row_at[1][slot];
      int64_t scalar_from = 0;
      if (vector) {
        const int64_t packs = cols / W;
        for (int64_t p = lane; p < packs; p += lanes) {
          *reinterpret_cast<Pack<E, W>*>(d + p * W) = *reinterpret_cast<const Pack<E, W>*>(s + p * W);
        }
        scalar_from = packs * W;
      }
      for (int64_t c = scalar_from + lane; c < cols; c += lanes) d[c * dst_col] = s[c * src_col];
    }
    __syncthreads();  // row_at is written again by the next pass
  }
}

// Whether copy_rows_kernel may move 16-byte packs: both sides step by 1
// along a row, and every row of both starts 16-byte aligned.
bool rows_pack(const void* dst, const void* src, size_t element_size, const StridedArgs<2>& args) {
  const int last = args.rank - 1;
  if (args.strides[0][last] != 1 || args.strides[1][last] != 1 || !aligned_16(dst) || !aligned_16(src)) return false;
  for (int d = 0; d < last; ++d) {
    for (int k = 0; k < 2; ++k) {
      if ((args.strides[k][d] * static_cast<int64_t>(element_size)) % 16 != 0) return false;
    }
  }
  return true;
}

template <class E>
void copy_rows(E* dst, const E* src, const StridedArgs<2>& args, Stream stream) {
  constexpr int W = kPackWidth<E>;
  const int64_t cols = args.shape[args.rank - 1];
  int64_t rows = 1;
  for (int d = 0; d + 1 < args.rank; ++d) rows *= args.shape[d];
  const bool vector = rows_pack(dst, src, sizeof(E), args);
  const int64_t per_row = vector ? (cols + W - 1) / W : cols;  // a row's work items
  int lanes = 1;
  while (lanes < kThreads && lanes < per_row) lanes *= 2;
  // Threads: kThreads, or fewer (a power of two, at least a warp) when the
  // rows do not fill a block; blocks: a pass each, at most 65535 (more loop).
  int threads = kThreads;
  while (threads > 32 && static_cast<int64_t>(threads / 2) >= lanes * rows) threads /= 2;
  const int64_t per_pass = threads / lanes;
  const auto blocks = static_cast<unsigned>(std::clamp<int64_t>((rows + per_pass - 1) / per_pass, 1, 65535));
  launch("strided_copy_rows", copy_rows_kernel<E>, {blocks, static_cast<unsigned>(threads)}, stream, dst, src, args,
         rows, lanes, vector);
}

std::atomic<uint64_t> g_taken[4];  // copies run by each CopyPath, for tests

CopyPath path_of(const StridedArgs<2>& args, int64_t n) {
  if (n == 0) return CopyPath::Nothing;
  if (args.rank == 0 || (args.rank == 1 && args.strides[0][0] == 1 && args.strides[1][0] == 1)) return CopyPath::Memcpy;
  return args.rank <= 2 ? CopyPath::TwoAxes : CopyPath::Rows;
}

template <class E>
void copy_as(void* dst, const void* src, CopyPath path, const StridedArgs<2>& args, Stream stream) {
  E* d = static_cast<E*>(dst);
  const E* s = static_cast<const E*>(src);
  if (path == CopyPath::Rows) return copy_rows(d, s, args, stream);
  const MapShape m = map_shape(args);
  map_rows("strided_copy", Dst<E>{d, m.row[0], m.col[0]}, m.rows, m.cols, stream, [] __device__(E v) -> E { return v; },
           Src<E>{s, m.row[1], m.col[1]});
}

void copy_sized(void* dst, const void* src, size_t element_size, const StridedArgs<2>& args, int64_t n,
                Stream stream) {
  const CopyPath path = path_of(args, n);
  g_taken[static_cast<int>(path)].fetch_add(1, std::memory_order_relaxed);
  if (path == CopyPath::Nothing) return;
  if (path == CopyPath::Memcpy) return copy_device_to_device(dst, src, static_cast<size_t>(n) * element_size, stream);
  switch (element_size) {
    case 1: return copy_as<uint8_t>(dst, src, path, args, stream);
    case 2: return copy_as<uint16_t>(dst, src, path, args, stream);
    case 4: return copy_as<uint32_t>(dst, src, path, args, stream);
    case 8: return copy_as<uint64_t>(dst, src, path, args, stream);
    default: fail("strided_copy", "elements of " + std::to_string(element_size) + " bytes", __FILE__, __LINE__);
  }
}

}  // namespace

void strided_copy(void* dst, const void* src, size_t element_size, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides, Stream stream) {
  const std::vector<int64_t> dense = dense_strides(shape);
  copy_sized(dst, src, element_size, strided_args<2>(shape, {&dense, &strides}), numel_of(shape), stream);
}

void strided_copy(void* dst, const std::vector<int64_t>& dst_strides, const void* src,
                  const std::vector<int64_t>& src_strides, size_t element_size, const std::vector<int64_t>& shape,
                  Stream stream) {
  copy_sized(dst, src, element_size, strided_args<2>(shape, {&dst_strides, &src_strides}), numel_of(shape), stream);
}

CopyPath strided_copy_path(const std::vector<int64_t>& dst_strides, const std::vector<int64_t>& src_strides,
                           const std::vector<int64_t>& shape) {
  return path_of(strided_args<2>(shape, {&dst_strides, &src_strides}), numel_of(shape));
}

uint64_t strided_copies_taken(CopyPath path) { return g_taken[static_cast<int>(path)].load(std::memory_order_relaxed); }

}  // namespace remat::kernels::cuda
