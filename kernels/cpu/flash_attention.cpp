// Fused attention on the CPU; see flash_attention.h. FlashAttention-2's
// loops over blocks of kBlock queries and kBlock keys, the block products
// through gemm() (single-threaded inside the parallel region, reading the
// strided q, k, v rows in place) and the softmax in `omp simd` loops.
//
// Forward: one task per (batch, head, query block). The block's output rows
// are the accumulator: for each key block, S = scale q k^T, the row maxima
// m grow, the rows so far are rescaled by exp(m_old - m_new), and P v is
// added; at the end each row is divided by its sum l and lse = m + log l.
// Causal attention skips the key blocks above the diagonal and masks the
// diagonal one (Tq = Tk, so query block i meets key block i there).
//
// Backward: P = exp(S - lse) again per block pair, dS = P (dP - D) with
// D = rowsum(dout * out), and dq += scale dS k, dk += scale dS^T q,
// dv += P^T dout, accumulated straight into the dense dq, dk, dv. Each of
// those blocks is summed by one task in a fixed order, so no atomics and no
// bits that depend on the threads: dq of (h, query block) over its key
// blocks in order; dk, dv of (kv head, key block) over (query head of the
// group, query block) in order. Two schedules keep those orders:
// - one task per (batch, kv head), owning its heads' dq rows and its dk, dv
//   rows, visiting (head, query block, key block): five block products a
//   pair, the fewest; used while there are enough such tasks to keep the
//   threads busy (W2 has 96);
// - otherwise (MQA at batch 1, ...) two passes: a task per (batch, kv head,
//   key block) for dk, dv and a task per (batch, head, query block) for dq,
//   which recomputes S, P and dP: seven block products a pair.
// Every accumulation is the same gemm on the same operands in the same order
// in both, so they give the same bits and the choice may depend on the
// thread count.
//
// Scratch: two (kBlock, kBlock) score blocks and kBlock row values, arrays
// on each task's stack (32 KB of float32, 64 KB of float64): nothing is
// allocated per call, and no D-sized buffer is needed, since every (rows,
// D) accumulator is the output itself.
#include "kernels/cpu/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"

namespace remat::kernels::cpu {
namespace {

constexpr int64_t kBlock = 64;  // queries, and keys, per block

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

// The keys of block pair (qb, kb) that local query row i sees: the first
// `visible` of the block's `keys`.
int64_t visible_keys(const AttentionDims& dims, int64_t qb, int64_t kb, int64_t i, int64_t keys) {
  return dims.causal && qb == kb ? i + 1 : keys;
}

// Row `t` of head (b, h) of an operand at `layout`.
template <class T> T* row_at(T* base, const AttentionLayout& layout, int64_t b, int64_t h, int64_t t) {
  return base + b * layout.batch + h * layout.head + t * layout.token;
}

// Everything a kernel reads, in one place for the block helpers.
template <class T> struct Operands {
  const T *q, *k, *v;
  AttentionDims dims;
  AttentionLayout q_layout, k_layout, v_layout;
  int64_t group() const { return dims.heads / dims.kv_heads; }  // query heads per kv head
};

// s (rows, keys; row stride kBlock) = scale q_blk k_blk^T for the (b, h)
// query block qb and key block kb.
template <class T> void block_scores(T* s, const Operands<T>& x, int64_t b, int64_t h, int64_t qb, int64_t kb) {
  const AttentionDims& d = x.dims;
  const int64_t rows = block_rows(d.q_len, qb), keys = block_rows(d.kv_len, kb), kvh = h / x.group();
  gemm<T>(false, true, rows, keys, d.head_dim, static_cast<T>(d.scale), row_at(x.q, x.q_layout, b, h, qb * kBlock),
          x.q_layout.token, row_at(x.k, x.k_layout, b, kvh, kb * kBlock), x.k_layout.token, T(0), s, kBlock);
}

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
  T* o = row_at(out, out_layout, b, h, qb * kBlock);  // (rows, D): the accumulator, then the output
  alignas(64) T s[kBlock * kBlock];                   // (rows, keys): scores, then probabilities
  T m[kBlock], l[kBlock];                             // (rows): running maximum and sum
  std::fill(m, m + rows, -std::numeric_limits<T>::infinity());
  std::fill(l, l + rows, T(0));
  const int64_t end = key_blocks_end(d, qb);
  for (int64_t kb = 0; kb < end; ++kb) {
    const int64_t keys = block_rows(d.kv_len, kb);
    block_scores(s, x, b, h, qb, kb);
    for (int64_t i = 0; i < rows; ++i) {
      T* si = s + i * kBlock;
      const int64_t n = visible_keys(d, qb, kb, i, keys);
      T mx = m[i];
#pragma omp simd reduction(max : mx)
      for (int64_t j = 0; j < n; ++j) mx = si[j] > mx ? si[j] : mx;
      T total = 0;
#pragma omp simd reduction(+ : total)
      for (int64_t j = 0; j < n; ++j) {
        si[j] = fast_exp(si[j] - mx);
        total += si[j];
      }
      for (int64_t j = n; j < keys; ++j) si[j] = 0;  // the future: masked
      if (kb > 0) {
        // The rows so far were weighted by exp(-m_old): rescale to exp(-mx).
        const T alpha = fast_exp(m[i] - mx);
        T* oi = o + i * ldo;
#pragma omp simd
        for (int64_t c = 0; c < d.head_dim; ++c) oi[c] *= alpha;
        l[i] = l[i] * alpha + total;
      } else {
        l[i] = total;
      }
      m[i] = mx;
    }
    // o (rows, D) (+)= P (rows, keys) v_blk (keys, D); the first block writes.
    gemm<T>(false, false, rows, d.head_dim, keys, T(1), s, kBlock, row_at(x.v, x.v_layout, b, kvh, kb * kBlock),
            x.v_layout.token, kb > 0 ? T(1) : T(0), o, ldo);
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
  T *dq, *dk, *dv;           // dense
  const T *dout, *out, *lse;  // dout, out at out_layout; lse dense (B, Hq, Tq)
  AttentionLayout out_layout;
};

// delta (rows) = rowsum(dout * out) of query block qb of head (b, h).
template <class T>
void block_delta(T* delta, const Gradients<T>& g, const AttentionDims& d, int64_t b, int64_t h, int64_t qb) {
  const int64_t rows = block_rows(d.q_len, qb);
  for (int64_t i = 0; i < rows; ++i) {
    const T* go = row_at(g.dout, g.out_layout, b, h, qb * kBlock + i);
    const T* oi = row_at(g.out, g.out_layout, b, h, qb * kBlock + i);
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < d.head_dim; ++c) dot += go[c] * oi[c];
    delta[i] = dot;
  }
}

// One block pair (qb, kb) of head (b, h): recomputes P and dS, and adds its
// terms to dk and dv of key block kb (with_dkv) and to dq of query block qb
// (with_dq). delta: block_delta's of qb.
template <class T>
void backward_pair(const Gradients<T>& g, const Operands<T>& x, const T* delta, int64_t b, int64_t h, int64_t qb,
                   int64_t kb, bool with_dkv, bool with_dq) {
  const AttentionDims& d = x.dims;
  const int64_t rows = block_rows(d.q_len, qb), keys = block_rows(d.kv_len, kb), kvh = h / x.group();
  const T scale = static_cast<T>(d.scale);
  alignas(64) T p[kBlock * kBlock];   // (rows, keys): scores, then P
  alignas(64) T ds[kBlock * kBlock];  // (rows, keys): dP, then dS
  block_scores(p, x, b, h, qb, kb);
  const T* lse_rows = g.lse + (b * d.heads + h) * d.q_len + qb * kBlock;  // (rows)
  for (int64_t i = 0; i < rows; ++i) {
    T* pi = p + i * kBlock;
    const int64_t n = visible_keys(d, qb, kb, i, keys);
    const T li = lse_rows[i];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) pi[j] = fast_exp(pi[j] - li);
    for (int64_t j = n; j < keys; ++j) pi[j] = 0;
  }
  const T* go = row_at(g.dout, g.out_layout, b, h, qb * kBlock);  // (rows, D)
  const int64_t ldo = g.out_layout.token;
  T* dk = g.dk + ((b * d.kv_heads + kvh) * d.kv_len + kb * kBlock) * d.head_dim;  // (keys, D)
  T* dv = g.dv + ((b * d.kv_heads + kvh) * d.kv_len + kb * kBlock) * d.head_dim;  // (keys, D)
  // dv += P^T dout
  if (with_dkv) gemm<T>(true, false, keys, d.head_dim, rows, T(1), p, kBlock, go, ldo, T(1), dv, d.head_dim);
  // dP = dout v^T
  gemm<T>(false, true, rows, keys, d.head_dim, T(1), go, ldo, row_at(x.v, x.v_layout, b, kvh, kb * kBlock),
          x.v_layout.token, T(0), ds, kBlock);
  // dS = P (dP - delta): d softmax
  for (int64_t i = 0; i < rows; ++i) {
    const T* pi = p + i * kBlock;
    T* dsi = ds + i * kBlock;
    const T di = delta[i];
#pragma omp simd
    for (int64_t j = 0; j < keys; ++j) dsi[j] = pi[j] * (dsi[j] - di);
  }
  // dk += scale dS^T q
  if (with_dkv) {
    gemm<T>(true, false, keys, d.head_dim, rows, scale, ds, kBlock, row_at(x.q, x.q_layout, b, h, qb * kBlock),
            x.q_layout.token, T(1), dk, d.head_dim);
  }
  // dq += scale dS k
  if (with_dq) {
    T* dq = g.dq + ((b * d.heads + h) * d.q_len + qb * kBlock) * d.head_dim;  // (rows, D)
    gemm<T>(false, false, rows, d.head_dim, keys, scale, ds, kBlock, row_at(x.k, x.k_layout, b, kvh, kb * kBlock),
            x.k_layout.token, T(1), dq, d.head_dim);
  }
}

// The dense rows [first, first + count) of head (b, h) of a (B, H, T, D) gradient, zeroed.
template <class T> void zero_rows(T* grad, int64_t heads, int64_t len, int64_t dim, int64_t b, int64_t h, int64_t first,
                                  int64_t count) {
  std::fill_n(grad + ((b * heads + h) * len + first) * dim, count * dim, T(0));
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
                              AttentionLayout k_layout, AttentionLayout v_layout, AttentionLayout out_layout, Host) {
  const Operands<T> x{q, k, v, dims, q_layout, k_layout, v_layout};
  const Gradients<T> g{dq, dk, dv, dout, out, lse, out_layout};
  const int64_t query_blocks = blocks(dims.q_len), key_blocks = blocks(dims.kv_len), group = x.group();
  const int64_t batch_kv = dims.batch * dims.kv_heads;
  const auto zero_dq = [&](int64_t b, int64_t h) { zero_rows(dq, dims.heads, dims.q_len, dims.head_dim, b, h, 0, dims.q_len); };
  if (batch_kv >= kTasksPerThread * num_threads() || num_threads() == 1) {
    for_each_task(batch_kv, [&](int64_t task) {
      const int64_t b = task / dims.kv_heads, kvh = task % dims.kv_heads;
      zero_rows(dk, dims.kv_heads, dims.kv_len, dims.head_dim, b, kvh, 0, dims.kv_len);
      zero_rows(dv, dims.kv_heads, dims.kv_len, dims.head_dim, b, kvh, 0, dims.kv_len);
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        zero_dq(b, h);
        for (int64_t qb = 0; qb < query_blocks; ++qb) {
          T delta[kBlock];  // (rows)
          block_delta(delta, g, dims, b, h, qb);
          for (int64_t kb = 0; kb < key_blocks_end(dims, qb); ++kb) backward_pair(g, x, delta, b, h, qb, kb, true, true);
        }
      }
    });
    return;
  }
  for_each_task(batch_kv * key_blocks, [&](int64_t task) {
    const int64_t kb = task % key_blocks, b = task / key_blocks / dims.kv_heads, kvh = task / key_blocks % dims.kv_heads;
    const int64_t keys = block_rows(dims.kv_len, kb);
    zero_rows(dk, dims.kv_heads, dims.kv_len, dims.head_dim, b, kvh, kb * kBlock, keys);
    zero_rows(dv, dims.kv_heads, dims.kv_len, dims.head_dim, b, kvh, kb * kBlock, keys);
    for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
      for (int64_t qb = query_blocks_begin(dims, kb); qb < query_blocks; ++qb) {
        T delta[kBlock];  // (rows)
        block_delta(delta, g, dims, b, h, qb);
        backward_pair(g, x, delta, b, h, qb, kb, true, false);
      }
    }
  });
  for_each_task(dims.batch * dims.heads * query_blocks, [&](int64_t task) {
    const int64_t qb = task % query_blocks, bh = task / query_blocks, b = bh / dims.heads, h = bh % dims.heads;
    zero_rows(dq, dims.heads, dims.q_len, dims.head_dim, b, h, qb * kBlock, block_rows(dims.q_len, qb));
    T delta[kBlock];  // (rows)
    block_delta(delta, g, dims, b, h, qb);
    for (int64_t kb = 0; kb < key_blocks_end(dims, qb); ++kb) backward_pair(g, x, delta, b, h, qb, kb, false, true);
  });
}

#define REMAT_INSTANTIATE_FLASH_ATTENTION(T)                                                                         \
  template void flash_attention_forward<T>(T*, T*, const T*, const T*, const T*, const AttentionDims&,               \
                                           AttentionLayout, AttentionLayout, AttentionLayout, AttentionLayout, Host); \
  template void flash_attention_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*,  \
                                            const AttentionDims&, AttentionLayout, AttentionLayout, AttentionLayout,  \
                                            AttentionLayout, Host);
REMAT_INSTANTIATE_FLASH_ATTENTION(float)
REMAT_INSTANTIATE_FLASH_ATTENTION(double)
#undef REMAT_INSTANTIATE_FLASH_ATTENTION

}  // namespace remat::kernels::cpu
