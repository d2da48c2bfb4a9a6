// Fused attention on the CPU; see flash_attention.h. FlashAttention-2's
// loops over blocks of kBlock queries and kBlock keys.
//
// Forward: one task per (batch, head, query block). The block's output rows
// are the accumulator: for each key block, S = scale q k^T, the row maxima
// m grow, the rows so far are rescaled by exp(m_old - m_new), and P v is
// added; at the end each row is divided by its sum l and lse = m + log l.
// Causal attention skips the key blocks above the diagonal and masks the
// diagonal one (Tq = Tk, so query block i meets key block i there).
//
// Backward: P = exp(S - lse) again per block pair, dS = P (dP - delta) with
// delta = rowsum(dout * out), and dq += scale dS k, dk += scale dS^T q,
// dv += P^T dout, accumulated straight into dq, dk, dv at their layouts. Each of
// those blocks is summed by one task in a fixed order, so no atomics and no
// bits that depend on the threads: dq of (head, query block) over its key
// blocks in order; dk, dv of (kv head, key block) over (query head of the
// group, query block) in order. Two schedules keep those orders:
// - one task per (batch, kv head), owning its heads' dq rows and its dk, dv
//   rows, visiting (head, query block, key block): five block products a
//   pair, the fewest; used while there are enough such tasks to keep the
//   threads busy (W2 has 96);
// - otherwise (MQA at batch 1, ...) two passes: a task per (batch, kv head,
//   key block) for dk, dv and a task per (batch, head, query block) for dq,
//   which recomputes S, P and dP: seven block products a pair (forced on
//   W2's shape, its backward took 1.5x the one pass's time).
// Every accumulation is the same block product on the same operands in the
// same order in both, so they give the same bits and the choice may depend
// on the thread count.
//
// Note [Transposed score blocks]
// Score blocks are held transposed, S^T (keys, queries): a row per key, a
// vector lane per query. Every block product is then one shape, C (m, n)
// (+)= alpha A B with A's elements broadcast and B's rows read as vectors
// (block_product below), B being k's, v's, q's or dout's rows in place or a
// query block transposed once (q^T, dout^T), reused for all its key blocks;
// and the softmax's per-query statistics (m, l, lse, delta) are vectors
// across the lanes, so its loops vectorise with no horizontal sums. The
// products are written here rather than called through gemm(): on 64-row
// blocks a library call costs its packing and set-up each time (BLIS ran
// them at 60% of its speed on 128-row ones, which W2's T = 128 makes the
// explicit path's), where this tile reads its operands once, from cache.
//
// Scratch: the (kBlock, kBlock) score blocks are arrays on each task's
// stack (one in forward, two in backward: 16 or 32 KB of float32); the
// transposed query blocks, (D, kBlock) each, are thread_local and grow once
// to the largest D a thread has seen, since D has no bound a stack frame
// could take. Nothing else is allocated: the outputs themselves are the
// (rows, D) accumulators.
#include "kernels/cpu/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/parallel.h"

namespace remat::kernels::cpu {
namespace {

constexpr int64_t kBlock = 64;  // queries, and keys, per block

// The block products' registers: an AVX-512 or an AVX2 vector, and a tile
// of kTileRows rows by kTileVectors vectors of C, as many accumulators as
// leave room for B's vectors and A's broadcast among 16 registers.
#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#else
constexpr int kVectorBytes = 32;
#endif
constexpr int64_t kTileRows = 6;
constexpr int kTileVectors = 2;
template <class T> struct VectorOf;
template <> struct VectorOf<float> { typedef float type __attribute__((vector_size(kVectorBytes))); };
template <> struct VectorOf<double> { typedef double type __attribute__((vector_size(kVectorBytes))); };
template <class T> using Vec = typename VectorOf<T>::type;
template <class T> constexpr int64_t kLanes = kVectorBytes / sizeof(T);

template <class T> Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T> void store(T* p, Vec<T> v) { std::memcpy(p, &v, sizeof v); }

// What a product on a causal diagonal block pair needs, where key j meets
// query i only for j <= i: all of C; or C(r, c) for c >= r only (S^T,
// dP^T: the others are left unwritten); or the terms k >= r (dk, dv) or
// k <= r (out, dq) of each row r's sum, A being 0 outside them.
enum class Part { All, Upper, DepthFromRow, DepthToRow };

// One block product: C (m, n; row stride ldc) = alpha A B, or C + alpha A B
// when accumulate, with A (m, depth) at a[i * a_row + k * a_col]
// (broadcast, one element at a time) and B (depth, n) rows at ldb (read as
// vectors). Each element of C is one sum over k in order, whatever m and
// n: Note [Transposed score blocks].
template <class T> struct Product {
  T* c;
  int64_t ldc;
  const T* a;
  int64_t a_row, a_col;
  const T* b;
  int64_t ldb;
  int64_t m, n, depth;
  T alpha = 1;
  bool accumulate = false;
  Part part = Part::All;
};

// Rows [i0, i0 + kTileRows) and the NV vectors of columns from j0 of a
// product, summed over k in [k0, k1); rows past m repeat row m - 1 and are
// not stored.
template <int NV, class T> void product_tile(const Product<T>& p, int64_t i0, int64_t j0, int64_t k0, int64_t k1) {
  using V = Vec<T>;
  constexpr int64_t L = kLanes<T>;
  const T* ar[kTileRows];
  for (int64_t r = 0; r < kTileRows; ++r) ar[r] = p.a + std::min(i0 + r, p.m - 1) * p.a_row;
  // Every index below is a constant once the loops are unrolled, so the
  // accumulators stay in registers (a loop to a run-time row count put
  // them in memory, zeroed there at every call).
  V acc[kTileRows][NV];
#pragma GCC unroll 16
  for (int r = 0; r < kTileRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  }
  const V ones = V{} + T(1);  // x * ones is x in every lane: a broadcast (0 + x would be an add, for x = -0)
  for (int64_t k = k0; k < k1; ++k) {
    V bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = load(p.b + k * p.ldb + j0 + v * L);
#pragma GCC unroll 16
    for (int r = 0; r < kTileRows; ++r) {
      const V av = ones * ar[r][k * p.a_col];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] += av * bv[v];
    }
  }
  const int64_t rows = std::min(kTileRows, p.m - i0);
#pragma GCC unroll 16
  for (int r = 0; r < kTileRows; ++r) {
    if (r >= rows) break;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      T* out = p.c + (i0 + r) * p.ldc + j0 + v * L;
      store(out, p.accumulate ? load(out) + acc[r][v] * p.alpha : acc[r][v] * p.alpha);
    }
  }
}

template <class T> void block_product(const Product<T>& p) {
  constexpr int64_t L = kLanes<T>, kWidth = kTileVectors * L;
  for (int64_t i0 = 0; i0 < p.m; i0 += kTileRows) {
    // Upper: the tiles from the one holding column i0; the depth a part needs.
    int64_t j0 = p.part == Part::Upper ? i0 / kWidth * kWidth : 0;
    const int64_t k0 = p.part == Part::DepthFromRow ? std::min(i0, p.depth) : 0;
    const int64_t k1 = p.part == Part::DepthToRow ? std::min(i0 + kTileRows, p.depth) : p.depth;
    for (; j0 + kWidth <= p.n; j0 += kWidth) product_tile<kTileVectors>(p, i0, j0, k0, k1);
    for (; j0 + L <= p.n; j0 += L) product_tile<1>(p, i0, j0, k0, k1);
    for (int64_t i = i0; i < std::min(i0 + kTileRows, p.m); ++i) {  // the last n % L columns
      for (int64_t j = j0; j < p.n; ++j) {
        T sum = 0;
        for (int64_t k = k0; k < k1; ++k) sum += p.a[i * p.a_row + k * p.a_col] * p.b[k * p.ldb + j];
        T& out = p.c[i * p.ldc + j];
        out = p.accumulate ? out + sum * p.alpha : sum * p.alpha;
      }
    }
  }
}

int64_t blocks(int64_t len) { return (len + kBlock - 1) / kBlock; }

// The rows of one block: kBlock but for the last.
int64_t block_rows(int64_t len, int64_t block) { return std::min(kBlock, len - block * kBlock); }

// The key blocks query block qb reads: [0, end). Causal stops at the
// diagonal block (Tq = Tk).
int64_t key_blocks_end(const AttentionDims& dims, int64_t qb) {
  return dims.causal ? std::min(blocks(dims.kv_len), qb + 1) : blocks(dims.kv_len);
}
// The query blocks that read key block kb: [begin, blocks(Tq)).
int64_t query_blocks_begin(const AttentionDims& dims, int64_t kb) { return dims.causal ? kb : 0; }

// Row `t` of head (b, h) of an operand at `layout`.
template <class T> T* row_at(T* base, const AttentionLayout& layout, int64_t b, int64_t h, int64_t t) {
  return base + b * layout.batch + h * layout.head + t * layout.token;
}

// Asks the cache for rows [first, first + count) of head (b, h) of an
// operand at `layout`, D elements each, ahead of their use (`write`: rows
// about to be written). A projection's rows lie a stride of kilobytes
// apart, which the hardware's prefetchers (following strides inside a
// 4 KiB page) do not follow: each row's first touch waited on memory, in
// the transposes and in the block products that read rows in place.
template <class T>
void prefetch_rows(const T* base, const AttentionLayout& layout, int64_t b, int64_t h, int64_t first, int64_t count,
                   int64_t dim, bool write = false) {
  constexpr int64_t kLine = 64 / static_cast<int64_t>(sizeof(T));  // elements per cache line
  for (int64_t t = first; t < first + count; ++t) {
    const T* row = row_at(base, layout, b, h, t);
    for (int64_t c = 0; c < dim; c += kLine) {
      if (write) {
        __builtin_prefetch(row + c, 1, 3);
      } else {
        __builtin_prefetch(row + c, 0, 3);
      }
    }
  }
}

// Scratch of n elements for the calling thread (`slot` 0 or 1), grown once.
template <class T> T* thread_scratch(int slot, int64_t n) {
  thread_local std::vector<T> buffers[2];
  std::vector<T>& buffer = buffers[slot];
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
  return buffer.data();
}

// xt (D, kBlock) = the (rows, D) block x (row stride ld) transposed, 0 in
// the columns past rows. float goes by 8 x 8 tiles in registers (eight
// vector loads, three rounds of shuffles, eight vector stores): element by
// element, its scattered stores and loads took a third of forward's time
// outside the products at W2's shape (measured with perf).
template <class T> void transpose_rows(T* xt, const T* x, int64_t ld, int64_t i0, int64_t rows, int64_t c0,
                                       int64_t dim) {
  for (int64_t i = i0; i < rows; ++i) {
    for (int64_t c = c0; c < dim; ++c) xt[c * kBlock + i] = x[i * ld + c];
  }
}

template <class T> void transpose_block(T* xt, const T* x, int64_t ld, int64_t rows, int64_t dim) {
  transpose_rows(xt, x, ld, 0, rows, 0, dim);
  for (int64_t c = 0; c < dim; ++c) std::fill(xt + c * kBlock + rows, xt + (c + 1) * kBlock, T(0));
}

// The lane shuffles of an 8 x 8 transpose, as __builtin_shufflevector
// (GCC 12 and clang alike; clang has no __builtin_shuffle).
using F8 = float __attribute__((vector_size(32)));
inline F8 unpack_lo(F8 a, F8 b) { return __builtin_shufflevector(a, b, 0, 8, 1, 9, 4, 12, 5, 13); }  // within halves
inline F8 unpack_hi(F8 a, F8 b) { return __builtin_shufflevector(a, b, 2, 10, 3, 11, 6, 14, 7, 15); }
inline F8 pairs_even(F8 a, F8 b) { return __builtin_shufflevector(a, b, 0, 1, 8, 9, 4, 5, 12, 13); }  // pairs of pairs
inline F8 pairs_odd(F8 a, F8 b) { return __builtin_shufflevector(a, b, 2, 3, 10, 11, 6, 7, 14, 15); }
inline F8 first_halves(F8 a, F8 b) { return __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11); }
inline F8 second_halves(F8 a, F8 b) { return __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15); }

template <> void transpose_block<float>(float* xt, const float* x, int64_t ld, int64_t rows, int64_t dim) {
  const int64_t full_rows = rows / 8 * 8, full_cols = dim / 8 * 8;
  for (int64_t i0 = 0; i0 < full_rows; i0 += 8) {
    for (int64_t c0 = 0; c0 < full_cols; c0 += 8) {
      F8 r[8], t[8], u[8];
      for (int i = 0; i < 8; ++i) std::memcpy(&r[i], x + (i0 + i) * ld + c0, sizeof(F8));
      for (int i = 0; i < 8; i += 2) {  // t: rows i, i + 1 interleaved
        t[i] = unpack_lo(r[i], r[i + 1]);
        t[i + 1] = unpack_hi(r[i], r[i + 1]);
      }
      for (int i = 0; i < 8; i += 4) {  // u: four rows' elements c, c + 4 side by side
        u[i] = pairs_even(t[i], t[i + 2]);
        u[i + 1] = pairs_odd(t[i], t[i + 2]);
        u[i + 2] = pairs_even(t[i + 1], t[i + 3]);
        u[i + 3] = pairs_odd(t[i + 1], t[i + 3]);
      }
      for (int c = 0; c < 4; ++c) {  // column c and c + 4 of the eight rows
        const F8 low = first_halves(u[c], u[c + 4]), high = second_halves(u[c], u[c + 4]);
        std::memcpy(xt + (c0 + c) * kBlock + i0, &low, sizeof(F8));
        std::memcpy(xt + (c0 + c + 4) * kBlock + i0, &high, sizeof(F8));
      }
    }
    transpose_rows(xt, x, ld, i0, i0 + 8, full_cols, dim);
  }
  transpose_rows(xt, x, ld, full_rows, rows, 0, dim);
  for (int64_t c = 0; c < dim; ++c) std::fill(xt + c * kBlock + rows, xt + (c + 1) * kBlock, 0.0f);
}

// Everything a kernel reads, in one place for the block helpers.
template <class T> struct Operands {
  const T *q, *k, *v;
  AttentionDims dims;
  AttentionLayout q_layout, k_layout, v_layout;
  int64_t group() const { return dims.heads / dims.kv_heads; }  // query heads per kv head
};

// st (keys, kBlock) = scale k_blk qt: S^T of the key block kb, given the
// query block transposed, qt (D, kBlock).
// On a causal diagonal block only the lanes i >= j of row j are written.
template <class T>
void scores_transposed(T* st, const T* qt, const Operands<T>& x, int64_t b, int64_t kvh, int64_t kb, bool diagonal) {
  block_product<T>({.c = st, .ldc = kBlock, .a = row_at(x.k, x.k_layout, b, kvh, kb * kBlock),
                    .a_row = x.k_layout.token, .a_col = 1, .b = qt, .ldb = kBlock,
                    .m = block_rows(x.dims.kv_len, kb), .n = kBlock, .depth = x.dims.head_dim,
                    .alpha = static_cast<T>(x.dims.scale), .part = diagonal ? Part::Upper : Part::All});
}

// Whether query lane i of a block pair sees key row j: all of them but on
// a causal diagonal block, where j <= i.
// int, not int64_t: the compare then fills a whole float vector's lanes.
inline bool seen(bool diagonal, int j, int i) { return !diagonal || j <= i; }
constexpr int kQueryLanes = static_cast<int>(kBlock);  // a block's queries, as the lanes of its loops

// Runs task(i) for i in [0, count) over the threads; dynamic, since causal
// tasks differ in size (which thread runs a task changes no bits).
template <class Task> void for_each_task(int64_t count, Task task) {
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < count; ++i) task(i);
}

// One forward task: query block qb of head (b, h).
template <class T>
void forward_block(T* out, T* lse, const Operands<T>& x, AttentionLayout out_layout, int64_t b, int64_t h,
                   int64_t qb) {
  const AttentionDims& d = x.dims;
  const int64_t rows = block_rows(d.q_len, qb), kvh = h / x.group(), ldo = out_layout.token;
  const int64_t end = key_blocks_end(d, qb), keys_read = std::min(d.kv_len, end * kBlock);
  prefetch_rows(x.q, x.q_layout, b, h, qb * kBlock, rows, d.head_dim);
  prefetch_rows(x.k, x.k_layout, b, kvh, 0, keys_read, d.head_dim);
  prefetch_rows(x.v, x.v_layout, b, kvh, 0, keys_read, d.head_dim);
  prefetch_rows(out, out_layout, b, h, qb * kBlock, rows, d.head_dim, true);
  T* qt = thread_scratch<T>(0, d.head_dim * kBlock);  // (D, kBlock)
  transpose_block(qt, row_at(x.q, x.q_layout, b, h, qb * kBlock), x.q_layout.token, rows, d.head_dim);
  T* o = row_at(out, out_layout, b, h, qb * kBlock);  // (rows, D): the accumulator, then the output
  // (keys, kBlock): S^T, then P^T. Zeroed once, so that the lanes a
  // diagonal block leaves unwritten hold numbers.
  alignas(64) T st[kBlock * kBlock] = {};
  // (kBlock) each, a lane per query: running maximum and sum, the block's
  // maximum and sum.
  alignas(64) T m[kBlock], l[kBlock], mx[kBlock], total[kBlock];
  std::fill(m, m + kBlock, -std::numeric_limits<T>::infinity());
  for (int64_t kb = 0; kb < end; ++kb) {
    const int64_t keys = block_rows(d.kv_len, kb);
    const bool diagonal = d.causal && kb == qb;
    scores_transposed(st, qt, x, b, kvh, kb, diagonal);
    std::copy(m, m + kBlock, mx);
    for (int64_t j = 0; j < keys; ++j) {
      const T* s = st + j * kBlock;
      const int key = static_cast<int>(j);
#pragma omp simd
      for (int i = 0; i < kQueryLanes; ++i) mx[i] = seen(diagonal, key, i) && s[i] > mx[i] ? s[i] : mx[i];
    }
    std::fill(total, total + kBlock, T(0));
    for (int64_t j = 0; j < keys; ++j) {
      T* s = st + j * kBlock;
      const int key = static_cast<int>(j);
#pragma omp simd
      for (int i = 0; i < kQueryLanes; ++i) {
        s[i] = seen(diagonal, key, i) ? fast_exp(s[i] - mx[i]) : T(0);
        total[i] += s[i];
      }
    }
    if (kb > 0) {
      // The rows so far were weighted by exp(-m_old): rescale to exp(-mx).
      for (int64_t i = 0; i < rows; ++i) {
        const T alpha = fast_exp(m[i] - mx[i]);
        T* oi = o + i * ldo;
#pragma omp simd
        for (int64_t c = 0; c < d.head_dim; ++c) oi[c] *= alpha;
        l[i] = l[i] * alpha + total[i];
      }
    } else {
      std::copy(total, total + kBlock, l);
    }
    std::copy(mx, mx + kBlock, m);
    // o (rows, D) (+)= P (rows, keys) v_blk (keys, D); P(i, j) = st[j kBlock + i]. The first block writes.
    block_product<T>({.c = o, .ldc = ldo, .a = st, .a_row = 1, .a_col = kBlock,
                      .b = row_at(x.v, x.v_layout, b, kvh, kb * kBlock), .ldb = x.v_layout.token, .m = rows,
                      .n = d.head_dim, .depth = keys, .accumulate = kb > 0,
                      .part = diagonal ? Part::DepthToRow : Part::All});
  }
  T* lse_rows = lse + (b * d.heads + h) * d.q_len + qb * kBlock;  // (rows)
  for (int64_t i = 0; i < rows; ++i) {
    const T inv = T(1) / l[i];
    T* oi = o + i * ldo;
#pragma omp simd
    for (int64_t c = 0; c < d.head_dim; ++c) oi[c] *= inv;
    lse_rows[i] = m[i] + std::log(l[i]);
  }
}

// What backward reads besides the operands, and writes.
template <class T> struct Gradients {
  T *dq, *dk, *dv;            // at layouts
  const T *dout, *out, *lse;  // dout, out at out_layout; lse dense (B, Hq, Tq)
  AttentionLayout out_layout;
  AttentionGradLayouts layouts;
};

// What every block pair of query block qb of head (b, h) reads, made once:
// q and dout transposed (in thread_local scratch), lse and delta =
// rowsum(dout * out) as lanes (0 past the block's rows); and the pairs'
// score blocks, zeroed with the task's QueryBlock{}, so that the lanes a
// diagonal block leaves unwritten hold numbers.
template <class T> struct QueryBlock {
  int64_t b, h, qb, rows;
  const T *q, *dout;  // (rows, D) at their layouts
  T *qt, *doutt;      // (D, kBlock)
  alignas(64) T lse[kBlock];
  alignas(64) T delta[kBlock];
  alignas(64) T pt[kBlock * kBlock];   // (keys, kBlock)
  alignas(64) T dst[kBlock * kBlock];  // (keys, kBlock)
};

template <class T>
void prepare_query_block(QueryBlock<T>& blk, const Gradients<T>& g, const Operands<T>& x, int64_t b, int64_t h,
                         int64_t qb) {
  const AttentionDims& d = x.dims;
  blk.b = b;
  blk.h = h;
  blk.qb = qb;
  blk.rows = block_rows(d.q_len, qb);
  blk.q = row_at(x.q, x.q_layout, b, h, qb * kBlock);
  blk.dout = row_at(g.dout, g.out_layout, b, h, qb * kBlock);
  blk.qt = thread_scratch<T>(0, d.head_dim * kBlock);
  blk.doutt = thread_scratch<T>(1, d.head_dim * kBlock);
  transpose_block(blk.qt, blk.q, x.q_layout.token, blk.rows, d.head_dim);
  transpose_block(blk.doutt, blk.dout, g.out_layout.token, blk.rows, d.head_dim);
  std::fill(blk.lse, blk.lse + kBlock, T(0));
  std::fill(blk.delta, blk.delta + kBlock, T(0));
  const T* lse_rows = g.lse + (b * d.heads + h) * d.q_len + qb * kBlock;
  for (int64_t i = 0; i < blk.rows; ++i) {
    const T* go = blk.dout + i * g.out_layout.token;
    const T* oi = row_at(g.out, g.out_layout, b, h, qb * kBlock + i);
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < d.head_dim; ++c) dot += go[c] * oi[c];
    blk.delta[i] = dot;
    blk.lse[i] = lse_rows[i];
  }
}

// One block pair (query block blk, key block kb): recomputes P and dS, and
// adds its terms to dk and dv of key block kb (with_dkv) and to dq of the
// query block (with_dq).
template <class T>
void backward_pair(const Gradients<T>& g, const Operands<T>& x, QueryBlock<T>& blk, int64_t kb, bool with_dkv,
                   bool with_dq) {
  const AttentionDims& d = x.dims;
  const int64_t b = blk.b, rows = blk.rows, keys = block_rows(d.kv_len, kb), kvh = blk.h / x.group();
  const bool diagonal = d.causal && kb == blk.qb;
  const T scale = static_cast<T>(d.scale);
  const Part lower = diagonal ? Part::DepthFromRow : Part::All;  // dk, dv: key row j sums the queries i >= j
  const T* kr = row_at(x.k, x.k_layout, b, kvh, kb * kBlock);  // (keys, D)
  const T* vr = row_at(x.v, x.v_layout, b, kvh, kb * kBlock);  // (keys, D)
  T* pt = blk.pt;                                              // (keys, kBlock): S^T, then P^T
  T* dst = blk.dst;                                            // (keys, kBlock): dP^T, then dS^T
  scores_transposed(pt, blk.qt, x, b, kvh, kb, diagonal);
  for (int64_t j = 0; j < keys; ++j) {
    T* p = pt + j * kBlock;
    const int key = static_cast<int>(j);
#pragma omp simd
    for (int i = 0; i < kQueryLanes; ++i) p[i] = seen(diagonal, key, i) ? fast_exp(p[i] - blk.lse[i]) : T(0);
  }
  T* dk = row_at(g.dk, g.layouts.dk, b, kvh, kb * kBlock);  // (keys, D)
  T* dv = row_at(g.dv, g.layouts.dv, b, kvh, kb * kBlock);  // (keys, D)
  // dv += P^T dout
  if (with_dkv) {
    block_product<T>({.c = dv, .ldc = g.layouts.dv.token, .a = pt, .a_row = kBlock, .a_col = 1, .b = blk.dout,
                      .ldb = g.out_layout.token, .m = keys, .n = d.head_dim, .depth = rows, .accumulate = true,
                      .part = lower});
  }
  // dP^T = v dout^T
  block_product<T>({.c = dst, .ldc = kBlock, .a = vr, .a_row = x.v_layout.token, .a_col = 1, .b = blk.doutt,
                    .ldb = kBlock, .m = keys, .n = kBlock, .depth = d.head_dim,
                    .part = diagonal ? Part::Upper : Part::All});
  // dS = P (dP - delta): d softmax
  for (int64_t j = 0; j < keys; ++j) {
    const T* p = pt + j * kBlock;
    T* ds = dst + j * kBlock;
    const int key = static_cast<int>(j);
#pragma omp simd
    for (int i = 0; i < kQueryLanes; ++i) ds[i] = seen(diagonal, key, i) ? p[i] * (ds[i] - blk.delta[i]) : T(0);
  }
  // dk += scale dS^T q
  if (with_dkv) {
    block_product<T>({.c = dk, .ldc = g.layouts.dk.token, .a = dst, .a_row = kBlock, .a_col = 1, .b = blk.q,
                      .ldb = x.q_layout.token, .m = keys, .n = d.head_dim, .depth = rows, .alpha = scale,
                      .accumulate = true, .part = lower});
  }
  // dq += scale dS k; dS(i, j) = dst[j kBlock + i]
  if (with_dq) {
    T* dq = row_at(g.dq, g.layouts.dq, b, blk.h, blk.qb * kBlock);  // (rows, D)
    block_product<T>({.c = dq, .ldc = g.layouts.dq.token, .a = dst, .a_row = 1, .a_col = kBlock, .b = kr,
                      .ldb = x.k_layout.token, .m = rows, .n = d.head_dim, .depth = keys, .alpha = scale,
                      .accumulate = true, .part = diagonal ? Part::DepthToRow : Part::All});
  }
}

// Rows [first, first + count) of head (b, h) of a gradient at `layout`, D elements each, zeroed.
template <class T>
void zero_rows(T* grad, const AttentionLayout& layout, int64_t dim, int64_t b, int64_t h, int64_t first,
               int64_t count) {
  for (int64_t t = first; t < first + count; ++t) std::fill_n(row_at(grad, layout, b, h, t), dim, T(0));
}

// Tasks per thread below which the one-pass schedule leaves threads idle.
constexpr int64_t kTasksPerThread = 4;

}  // namespace

template <class T>
void flash_attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionDims& dims,
                             AttentionLayout q_layout, AttentionLayout k_layout, AttentionLayout v_layout,
                             AttentionLayout out_layout, Host) {
  const Operands<T> x{q, k, v, dims, q_layout, k_layout, v_layout};
  const int64_t query_blocks = blocks(dims.q_len);
  for_each_task(dims.batch * dims.heads * query_blocks, [&](int64_t task) {
    const int64_t qb = task % query_blocks, bh = task / query_blocks;
    forward_block(out, lse, x, out_layout, bh / dims.heads, bh % dims.heads, qb);
  });
}

template <class T>
void flash_attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                              const T* lse, const AttentionDims& dims, AttentionLayout q_layout,
                              AttentionLayout k_layout, AttentionLayout v_layout, AttentionLayout out_layout,
                              AttentionGradLayouts grad_layouts, Host) {
  const Operands<T> x{q, k, v, dims, q_layout, k_layout, v_layout};
  const Gradients<T> g{dq, dk, dv, dout, out, lse, out_layout, grad_layouts};
  const AttentionGradLayouts& gl = grad_layouts;
  const int64_t query_blocks = blocks(dims.q_len), key_blocks = blocks(dims.kv_len), group = x.group();
  const int64_t batch_kv = dims.batch * dims.kv_heads, dim = dims.head_dim;
  if (batch_kv >= kTasksPerThread * num_threads() || num_threads() == 1) {
    for_each_task(batch_kv, [&](int64_t task) {
      const int64_t b = task / dims.kv_heads, kvh = task % dims.kv_heads;
      prefetch_rows(k, k_layout, b, kvh, 0, dims.kv_len, dim);
      prefetch_rows(v, v_layout, b, kvh, 0, dims.kv_len, dim);
      zero_rows(dk, gl.dk, dim, b, kvh, 0, dims.kv_len);
      zero_rows(dv, gl.dv, dim, b, kvh, 0, dims.kv_len);
      QueryBlock<T> blk{};
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        prefetch_rows(q, q_layout, b, h, 0, dims.q_len, dim);
        prefetch_rows(dout, out_layout, b, h, 0, dims.q_len, dim);
        prefetch_rows(out, out_layout, b, h, 0, dims.q_len, dim);
        zero_rows(dq, gl.dq, dim, b, h, 0, dims.q_len);
        for (int64_t qb = 0; qb < query_blocks; ++qb) {
          prepare_query_block(blk, g, x, b, h, qb);
          for (int64_t kb = 0; kb < key_blocks_end(dims, qb); ++kb) backward_pair(g, x, blk, kb, true, true);
        }
      }
    });
    return;
  }
  for_each_task(batch_kv * key_blocks, [&](int64_t task) {
    const int64_t kb = task % key_blocks, b = task / key_blocks / dims.kv_heads, kvh = task / key_blocks % dims.kv_heads;
    const int64_t keys = block_rows(dims.kv_len, kb), first_query = query_blocks_begin(dims, kb) * kBlock;
    prefetch_rows(k, k_layout, b, kvh, kb * kBlock, keys, dim);
    prefetch_rows(v, v_layout, b, kvh, kb * kBlock, keys, dim);
    zero_rows(dk, gl.dk, dim, b, kvh, kb * kBlock, keys);
    zero_rows(dv, gl.dv, dim, b, kvh, kb * kBlock, keys);
    QueryBlock<T> blk{};
    for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
      prefetch_rows(q, q_layout, b, h, first_query, dims.q_len - first_query, dim);
      prefetch_rows(dout, out_layout, b, h, first_query, dims.q_len - first_query, dim);
      prefetch_rows(out, out_layout, b, h, first_query, dims.q_len - first_query, dim);
      for (int64_t qb = query_blocks_begin(dims, kb); qb < query_blocks; ++qb) {
        prepare_query_block(blk, g, x, b, h, qb);
        backward_pair(g, x, blk, kb, true, false);
      }
    }
  });
  for_each_task(dims.batch * dims.heads * query_blocks, [&](int64_t task) {
    const int64_t qb = task % query_blocks, bh = task / query_blocks, b = bh / dims.heads, h = bh % dims.heads;
    const int64_t rows = block_rows(dims.q_len, qb);
    const int64_t keys_read = std::min(dims.kv_len, key_blocks_end(dims, qb) * kBlock);
    prefetch_rows(q, q_layout, b, h, qb * kBlock, rows, dim);
    prefetch_rows(dout, out_layout, b, h, qb * kBlock, rows, dim);
    prefetch_rows(out, out_layout, b, h, qb * kBlock, rows, dim);
    prefetch_rows(k, k_layout, b, h / group, 0, keys_read, dim);
    prefetch_rows(v, v_layout, b, h / group, 0, keys_read, dim);
    zero_rows(dq, gl.dq, dim, b, h, qb * kBlock, rows);
    QueryBlock<T> blk{};
    prepare_query_block(blk, g, x, b, h, qb);
    for (int64_t kb = 0; kb < key_blocks_end(dims, qb); ++kb) backward_pair(g, x, blk, kb, false, true);
  });
}

#define REMAT_INSTANTIATE_FLASH_ATTENTION(T)                                                                         \
  template void flash_attention_forward<T>(T*, T*, const T*, const T*, const T*, const AttentionDims&,               \
                                           AttentionLayout, AttentionLayout, AttentionLayout, AttentionLayout, Host); \
  template void flash_attention_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*,  \
                                            const AttentionDims&, AttentionLayout, AttentionLayout, AttentionLayout,  \
                                            AttentionLayout, AttentionGradLayouts, Host);
REMAT_INSTANTIATE_FLASH_ATTENTION(float)
REMAT_INSTANTIATE_FLASH_ATTENTION(double)
#undef REMAT_INSTANTIATE_FLASH_ATTENTION

}  // namespace remat::kernels::cpu
