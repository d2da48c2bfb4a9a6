// Elementwise maps without per-element index arithmetic: the shared paths
// of binary.cu, unary.cu, mask.cu, copy.cu and dropout.cu. Not for kernels
// that reduce (reduce.cu, softmax.cu). For .cu files only.
//
// A map writes out[r, c] = f(src0[r, c], src1[r, c]) over a (rows, cols)
// grid whose operands each step by (row, col) elements: a contiguous tensor
// is one row (rows 1), a bias broadcast over rows is (rows, channels) with
// the bias stepping (0, 1), a mask broadcast over heads (heads, t * t) with
// (0, 1). Shapes of more axes that strided_args cannot merge into two keep
// the per-element division of offsets_of (launch.cuh); map_shape says which.
//
// Note [Vector loads]: where every operand steps by 1 along a row (or 0, a
// value per row) and every row of every operand starts 16-byte aligned,
// a thread moves 16 bytes at a time (4 floats, 2 doubles) through Pack, one
// 128-bit load or store on a GPU; the last cols % width elements of a row
// (odd n, a view starting at element 1: then the whole row) go one at a
// time. Each element's math is the same f on the same values either way,
// so both paths give the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/launch.cuh"

namespace remat::kernels::cuda {

// W elements of U moved as one (W * sizeof(U) >= 16 bytes, 16-byte aligned).
template <class U, int W>
struct alignas(16) Pack {
  U v[W];
};

// The elements of T a 16-byte load holds.
template <class T>
inline constexpr int kPackWidth = static_cast<int>(16 / sizeof(T));

inline bool aligned_16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// An operand read at ptr[r * row + c * col].
template <class U>
struct Src {
  const U* ptr;
  int64_t row, col;
  __device__ U at(int64_t r, int64_t c) const { return ptr[r * row + c * col]; }
  // Elements p * W ... p * W + W - 1 of row r (col is 1, or 0: the row's one value).
  template <int W>
  __device__ Pack<U, W> pack(int64_t r, int64_t p) const {
    if (col == 0) {
      Pack<U, W> out;
      const U v = ptr[r * row];
      for (int j = 0; j < W; ++j) out.v[j] = v;
      return out;
    }
    return *reinterpret_cast<const Pack<U, W>*>(ptr + r * row + p * W);
  }
  // Whether pack() may load 16 bytes at a time from every one of `rows` rows.
  bool packs(int width, int64_t rows) const {
    if (col == 0) return true;
    return col == 1 && sizeof(U) * width >= 16 && aligned_16(ptr) &&
           (rows == 1 || (row * static_cast<int64_t>(sizeof(U))) % 16 == 0);
  }
};

// The written operand, at ptr[r * row + c * col].
template <class T>
struct Dst {
  T* ptr;
  int64_t row, col;
  bool packs(int64_t rows) const {
    return col == 1 && aligned_16(ptr) && (rows == 1 || (row * static_cast<int64_t>(sizeof(T))) % 16 == 0);
  }
};

template <class T, int W, class F>
__device__ inline Pack<T, W> map_pack(const F& f, int64_t, int64_t) {
  Pack<T, W> out;
  for (int j = 0; j < W; ++j) out.v[j] = f();
  return out;
}
template <class T, int W, class F, class S0>
__device__ inline Pack<T, W> map_pack(const F& f, int64_t r, int64_t p, const S0& s0) {
  const auto a = s0.template pack<W>(r, p);
  Pack<T, W> out;
  for (int j = 0; j < W; ++j) out.v[j] = f(a.v[j]);
  return out;
}
template <class T, int W, class F, class S0, class S1>
__device__ inline Pack<T, W> map_pack(const F& f, int64_t r, int64_t p, const S0& s0, const S1& s1) {
  const auto a = s0.template pack<W>(r, p);
  const auto b = s1.template pack<W>(r, p);
  Pack<T, W> out;
  for (int j = 0; j < W; ++j) out.v[j] = f(a.v[j], b.v[j]);
  return out;
}

// Rows blockIdx.y, then gridDim.y on; along a row, the grid's x threads take
// packs (Note [Vector loads]) then the elements after the last whole pack.
// Every input of a pack is loaded before its output is stored, so out may
// be an input itself (in place) when both step alike.
template <class T, class F, class... Srcs>
__global__ void map_rows_kernel(Dst<T> out, int64_t rows, int64_t cols, bool vector, F f, Srcs... srcs) {
  constexpr int W = kPackWidth<T>;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    T* row = out.ptr + r * out.row;
    int64_t scalar_from = 0;
    if (vector) {
      const int64_t packs = cols / W;
      for (int64_t p = first; p < packs; p += step) {
        *reinterpret_cast<Pack<T, W>*>(row + p * W) = map_pack<T, W>(f, r, p, srcs...);
      }
      scalar_from = packs * W;
    }
    for (int64_t c = scalar_from + first; c < cols; c += step) row[c * out.col] = f(srcs.at(r, c)...);
  }
}

// out = f(srcs...) over (rows, cols), on `stream`; nothing when empty.
template <class T, class F, class... Srcs>
void map_rows(const char* name, Dst<T> out, int64_t rows, int64_t cols, Stream stream, F f, Srcs... srcs) {
  if (rows == 0 || cols == 0) return;
  constexpr int W = kPackWidth<T>;
  const bool vector = out.packs(rows) && (srcs.packs(W, rows) && ...);
  const int64_t per_row = vector ? (cols + W - 1) / W : cols;  // work items of a row
  // Threads a block: a row's items rounded up to a warp, at most kThreads;
  // blocks along x to cover a row (at most 4096), along y up to ~8192 in all.
  const int64_t threads = std::clamp<int64_t>((per_row + 31) / 32 * 32, 32, kThreads);
  const int64_t x = std::clamp<int64_t>((per_row + threads - 1) / threads, 1, 4096);
  const int64_t y = std::clamp<int64_t>(std::min<int64_t>(rows, 8192 / x), 1, 65535);
  launch(name, map_rows_kernel<T, F, Srcs...>, {dim3(static_cast<unsigned>(x), static_cast<unsigned>(y)),
                                                 dim3(static_cast<unsigned>(threads))},
         stream, out, rows, cols, vector, f, srcs...);
}

// A dense operand of n elements, as one row.
template <class U>
Src<U> dense(const U* ptr) {
  return {ptr, 0, 1};
}
template <class T>
Dst<T> dense_out(T* ptr) {
  return {ptr, 0, 1};
}

// (rows, cols) and each operand's (row, col) steps from merged strided
// arguments of rank 0, 1 or 2; false for more axes (offsets_of's path).
struct MapShape {
  bool fits = false;
  int64_t rows = 1, cols = 1;
  int64_t row[kMaxRank] = {}, col[kMaxRank] = {};  // per operand
};

template <int K>
MapShape map_shape(const StridedArgs<K>& args) {
  MapShape m;
  if (args.rank > 2) return m;
  m.fits = true;
  if (args.rank == 2) {
    m.rows = args.shape[0];
    m.cols = args.shape[1];
    for (int k = 0; k < K; ++k) {
      m.row[k] = args.strides[k][0];
      m.col[k] = args.strides[k][1];
    }
  } else if (args.rank == 1) {
    m.cols = args.shape[0];
    for (int k = 0; k < K; ++k) m.col[k] = args.strides[k][0];
  }
  return m;
}

}  // namespace remat::kernels::cuda
