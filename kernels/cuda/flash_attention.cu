// Fused attention on the GPU, flash-style (FlashAttention-2's split of the
// work, without tensor cores); see flash_attention.h. Every kernel is a block
// of 4 warps (128 threads) over tiles staged in dynamic shared memory:
//
// - FORWARD: a block per (batch, head, tile of 16 queries), a warp per 4 of
//   the queries. Keys come in tiles of 32 (causal: up to the query tile's
//   last row only, the tiles above the diagonal skipped) and lane j takes
//   key j: its 4 scores scale q_i . k_j in one pass over d, each row's tile
//   maximum by a __shfl_xor_sync butterfly, p_ij = exp(s_ij - m_i) into
//   shared memory, then each lane rescales its part of o_i by exp(m_old -
//   m_new) and adds sum_j p_ij v_j for its own d = lane, lane + 32, ..., keys
//   in order (the online softmax). Each lane keeps its own share of the row's
//   sum of p, rescaled the same way; the 32 shares are added once, at the
//   end, where out = o / l and lse = m + log l are written, once.
// - BACKWARD, first D_i = rowsum(dout_i * out_i) into scratch (B, Hq, Tq):
//   rows.cuh's warp per row.
// - dk, dv: a block per (batch, kv head, tile of 16 keys), a warp per 4 of
//   the keys, looping over the group's query heads in order and, for each,
//   over query tiles of 32 in order (causal: from the tile holding the key
//   tile's first key on). Lane i takes query i: P_ij = exp(scale q_i . k_j -
//   lse_i) and dS_ij = P_ij (dout_i . v_j - D_i) into shared memory, then
//   each lane adds dv_j += P_ij dout_i and dk_j += dS_ij q_i for its d's,
//   queries in order.
// - dq: a block per (batch, head, tile of 16 queries), as forward: P and dS
//   recomputed for each key tile (the second pass over the keys), dq_i +=
//   dS_ij k_j for the lane's d's, keys in order.
// A row of shared memory that the 32 lanes read across (k in forward; k, v
// in dq; q, dout in dk/dv) is padded to D + 1 elements, so that one column
// lies in 32 banks. Rows past a sequence's end are staged as zeros and
// masked.
//
// Why the bits repeat run to run: each element of out, lse, dq, dk and dv is
// one thread's sum (or one warp butterfly's) over keys, queries, heads and d
// in an order fixed by the shape alone; a block writes only its own rows,
// there are no atomics, and nothing depends on timing or on which SM runs
// which block. The butterfly leaves every lane the same bits (max_of and
// IEEE addition are commutative).
//
// Left for a real GPU: no GPU has run this code (CI runs it on the emulated
// GPU, docs/gpu/emulation.md). Tensor cores (wmma / mma) are not used: the
// products are scalar FMAs from shared memory, far below an H100's TF32 or
// bf16 throughput. No exp2 with log2(e) folded into the scale, no cp.async
// double buffering of the next K/V tile, no 16-byte loads. The tiles (16 x
// 32, 128 threads; a lane's d's in register tiles of 1, 2, 4 or 8 chunks of
// 32, so D up to kFlashMaxHeadDim = 256) were chosen for correctness on the
// emulator and a reasonable occupancy on an H100 (float at D = 128: 42 KiB
// of shared memory forward, 50-53 KiB backward, 4-5 blocks an SM; ptxas
// reports 56-72 registers and no spills), not measured on any GPU.
#include "kernels/cuda/flash_attention.h"

#include <math.h>

#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/rows.cuh"

namespace remat::kernels::cuda {
namespace {

using rowwise::exp_of;
using rowwise::kWarp;
using rowwise::log_of;
using rowwise::lowest;
using rowwise::max_of;
using rowwise::warp_max;
using rowwise::warp_sum;

constexpr int kWarps = 4;                            // a block's warps
constexpr int kBlockThreads = kWarps * kWarp;        // 128
constexpr int kRowsPerWarp = 4;                      // queries (forward, dq) or keys (dk, dv) a warp holds
constexpr int kRowTile = kWarps * kRowsPerWarp;      // 16: the rows a block holds
constexpr int kLaneTile = kWarp;                     // 32: the other side's tile, a row a lane
constexpr size_t kDefaultSharedBytes = size_t{48} << 10;  // more needs cudaFuncSetAttribute

// The problem, by value for a kernel (kernels/attention_dims.h).
template <class T>
struct Problem {
  int64_t heads, kv_heads, q_len, kv_len;
  int head_dim;   // D
  int64_t group;  // heads / kv_heads: query head h reads kv head h / group
  bool causal;
  T scale;
};

__host__ __device__ inline int64_t tiles_of(int64_t n, int64_t tile) { return (n + tile - 1) / tile; }
__device__ inline int64_t smaller(int64_t a, int64_t b) { return a < b ? a : b; }

// Where row (b, h, t) of an operand at `layout` starts.
__device__ inline int64_t at(AttentionLayout layout, int64_t b, int64_t h, int64_t t) {
  return b * layout.batch + h * layout.head + t * layout.token;
}

// Whether query i sees key j (both inside their sequences).
template <class T>
__device__ inline bool sees(const Problem<T>& p, int64_t i, int64_t j) {
  return i < p.q_len && j < p.kv_len && (!p.causal || j <= i);
}

// dst[r * stride + d] = row r of src (rows `token` apart) for r < rows and
// d < D, a warp a row; rows from `valid` on are zeros (past the sequence:
// read, but masked). The block's threads all call it.
template <class T>
__device__ inline void stage_rows(T* dst, int stride, const T* src, int64_t token, int64_t valid, int rows, int D) {
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  for (int r = warp; r < rows; r += kWarps) {
    for (int d = lane; d < D; d += kWarp) dst[r * stride + d] = r < valid ? src[r * token + d] : T(0);
  }
}

// dst[r] = src[r] for r < valid, zeros to n.
template <class T>
__device__ inline void stage_values(T* dst, const T* src, int64_t valid, int n) {
  for (int r = static_cast<int>(threadIdx.x); r < n; r += kBlockThreads) dst[r] = r < valid ? src[r] : T(0);
}

// Each kernel's shared memory, in elements of T, carved in this order (the
// launcher sizes it from the same struct).
struct ForwardShared {
  int64_t q, k, v, p, total;
  __host__ __device__ explicit ForwardShared(int64_t D)
      : q(0),                               // (kRowTile, D)
        k(q + kRowTile * D),                // (kLaneTile, D + 1)
        v(k + kLaneTile * (D + 1)),         // (kLaneTile, D)
        p(v + kLaneTile * D),               // (kWarps, kRowsPerWarp, kLaneTile)
        total(p + kRowTile * kLaneTile) {}
};

struct DqShared {
  int64_t q, dout, k, v, lse, dot, ds, total;
  __host__ __device__ explicit DqShared(int64_t D)
      : q(0),                               // (kRowTile, D)
        dout(q + kRowTile * D),             // (kRowTile, D)
        k(dout + kRowTile * D),             // (kLaneTile, D + 1)
        v(k + kLaneTile * (D + 1)),         // (kLaneTile, D + 1)
        lse(v + kLaneTile * (D + 1)),       // (kRowTile)
        dot(lse + kRowTile),                // (kRowTile)
        ds(dot + kRowTile),                 // (kWarps, kRowsPerWarp, kLaneTile)
        total(ds + kRowTile * kLaneTile) {}
};

struct DkDvShared {
  int64_t k, v, q, dout, lse, dot, p, ds, total;
  __host__ __device__ explicit DkDvShared(int64_t D)
      : k(0),                               // (kRowTile, D)
        v(k + kRowTile * D),                // (kRowTile, D)
        q(v + kRowTile * D),                // (kLaneTile, D + 1)
        dout(q + kLaneTile * (D + 1)),      // (kLaneTile, D + 1)
        lse(dout + kLaneTile * (D + 1)),    // (kLaneTile)
        dot(lse + kLaneTile),               // (kLaneTile)
        p(dot + kLaneTile),                 // (kWarps, kRowsPerWarp, kLaneTile)
        ds(p + kRowTile * kLaneTile),       // (kWarps, kRowsPerWarp, kLaneTile)
        total(ds + kRowTile * kLaneTile) {}
};

// out (B, Hq, Tq, D) at ol, lse (B, Hq, Tq): block = (b, h, query tile).
// kChunks: a lane's d's, lane + 32 c for c < kChunks (D <= 32 kChunks).
template <class T, int kChunks>
__global__ void forward_kernel(T* out, T* lse, const T* q, const T* k, const T* v, Problem<T> p, AttentionLayout ql,
                               AttentionLayout kl, AttentionLayout vl, AttentionLayout ol) {
  const int D = p.head_dim;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t tiles = tiles_of(p.q_len, kRowTile);
  const int64_t bh = blockIdx.x / tiles, h = bh % p.heads, b = bh / p.heads, kvh = h / p.group;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x % tiles) * kRowTile;
  const ForwardShared shared(D);
  T* q_s = dynamic_shared<T>() + shared.q;  // (kRowTile, D)
  T* k_s = dynamic_shared<T>() + shared.k;  // (kLaneTile, D + 1)
  T* v_s = dynamic_shared<T>() + shared.v;  // (kLaneTile, D)
  T* p_w = dynamic_shared<T>() + shared.p + warp * kRowsPerWarp * kLaneTile;  // this warp's (kRowsPerWarp, kLaneTile)
  const T* q_w = q_s + warp * kRowsPerWarp * D;                                // this warp's queries
  stage_rows(q_s, D, q + at(ql, b, h, q0), ql.token, p.q_len - q0, kRowTile, D);

  T o[kRowsPerWarp][kChunks] = {};  // the lane's d's of the unnormalised output
  T m[kRowsPerWarp], l[kRowsPerWarp];  // each row's running max; the lane's share of its sum of p
  for (int r = 0; r < kRowsPerWarp; ++r) m[r] = lowest<T>(), l[r] = T(0);
  // The keys the tile's rows see: every key, or (causal) up to its last row.
  const int64_t key_end = p.causal ? smaller(p.kv_len, q0 + kRowTile) : p.kv_len;
  for (int64_t k0 = 0; k0 < key_end; k0 += kLaneTile) {
    __syncthreads();  // the previous tile's k_s, v_s and p_w are read
    stage_rows(k_s, D + 1, k + at(kl, b, kvh, k0), kl.token, p.kv_len - k0, kLaneTile, D);
    stage_rows(v_s, D, v + at(vl, b, kvh, k0), vl.token, p.kv_len - k0, kLaneTile, D);
    __syncthreads();
    // s_r = q_i . k_j for the warp's queries i and the lane's key j
    T s[kRowsPerWarp] = {};
    const T* kj = k_s + lane * (D + 1);
    for (int d = 0; d < D; ++d) {
      const T kd = kj[d];
      for (int r = 0; r < kRowsPerWarp; ++r) s[r] += q_w[r * D + d] * kd;
    }
    const int64_t j = k0 + lane;
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t i = q0 + warp * kRowsPerWarp + r;
      const bool seen = sees(p, i, j);
      const T score = seen ? p.scale * s[r] : lowest<T>();
      const T m_new = max_of(m[r], warp_max(score));
      // A row that has seen no key yet keeps o = 0 and l = 0.
      const T alpha = m_new == lowest<T>() ? T(0) : exp_of(m[r] - m_new);
      const T prob = seen ? exp_of(score - m_new) : T(0);
      m[r] = m_new;
      l[r] = l[r] * alpha + prob;
      p_w[r * kLaneTile + lane] = prob;
      for (int c = 0; c < kChunks; ++c) o[r][c] *= alpha;
    }
    __syncwarp();
    // o_i += sum_j p_ij v_j, keys in order
    const int keys = static_cast<int>(smaller(kLaneTile, p.kv_len - k0));
    for (int jj = 0; jj < keys; ++jj) {
      for (int c = 0; c < kChunks; ++c) {
        const int d = lane + kWarp * c;
        if (d >= D) break;
        const T vd = v_s[jj * D + d];
        for (int r = 0; r < kRowsPerWarp; ++r) o[r][c] += p_w[r * kLaneTile + jj] * vd;
      }
    }
  }
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = q0 + warp * kRowsPerWarp + r;
    const T total = warp_sum(l[r]);  // every lane calls it, rows past Tq too
    if (i >= p.q_len) continue;
    const T inv = total > T(0) ? T(1) / total : T(0);  // Tk = 0: no key, out 0
    T* out_i = out + at(ol, b, h, i);
    for (int c = 0; c < kChunks; ++c) {
      const int d = lane + kWarp * c;
      if (d < D) out_i[d] = o[r][c] * inv;
    }
    if (lane == 0) lse[bh * p.q_len + i] = total > T(0) ? m[r] + log_of(total) : lowest<T>();
  }
}

// dot (B, Hq, Tq) = rowsum(dout * out), for a warp (or block) per row.
template <class T>
struct RowDot {
  using Value = T;
  T* dot;
  const T* dout;  // (B, Hq, Tq, D) at layout
  const T* out;   // (B, Hq, Tq, D) at layout
  AttentionLayout layout;
  int64_t heads, q_len, head_dim;
  template <class Team>
  __device__ void operator()(const Team& team, int64_t r) const {
    const int64_t i = r % q_len, bh = r / q_len;
    const int64_t row = at(layout, bh / heads, bh % heads, i);
    T acc = 0;
    for (int64_t d = team.rank(); d < head_dim; d += team.size()) acc += dout[row + d] * out[row + d];
    acc = team.sum(acc);
    if (team.rank() == 0) dot[r] = acc;
  }
};

// dk, dv (B, Hkv, Tk, D) at dkl, dvl: block = (b, kv head, key tile).
// dv_j = sum_i P_ij dout_i, dk_j = scale sum_i dS_ij q_i over the group's heads.
template <class T, int kChunks>
__global__ void dk_dv_kernel(T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* lse,
                             const T* dot, Problem<T> p, AttentionLayout ql, AttentionLayout kl, AttentionLayout vl,
                             AttentionLayout ol, AttentionLayout dkl, AttentionLayout dvl) {
  const int D = p.head_dim;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t tiles = tiles_of(p.kv_len, kRowTile);
  const int64_t bg = blockIdx.x / tiles, g = bg % p.kv_heads, b = bg / p.kv_heads;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x % tiles) * kRowTile;
  const DkDvShared shared(D);
  T* k_s = dynamic_shared<T>() + shared.k;        // (kRowTile, D)
  T* v_s = dynamic_shared<T>() + shared.v;        // (kRowTile, D)
  T* q_s = dynamic_shared<T>() + shared.q;        // (kLaneTile, D + 1)
  T* dout_s = dynamic_shared<T>() + shared.dout;  // (kLaneTile, D + 1)
  T* lse_s = dynamic_shared<T>() + shared.lse;    // (kLaneTile)
  T* dot_s = dynamic_shared<T>() + shared.dot;    // (kLaneTile)
  T* p_w = dynamic_shared<T>() + shared.p + warp * kRowsPerWarp * kLaneTile;   // (kRowsPerWarp, kLaneTile)
  T* ds_w = dynamic_shared<T>() + shared.ds + warp * kRowsPerWarp * kLaneTile;  // (kRowsPerWarp, kLaneTile)
  const T* k_w = k_s + warp * kRowsPerWarp * D;  // this warp's keys
  const T* v_w = v_s + warp * kRowsPerWarp * D;
  stage_rows(k_s, D, k + at(kl, b, g, k0), kl.token, p.kv_len - k0, kRowTile, D);
  stage_rows(v_s, D, v + at(vl, b, g, k0), vl.token, p.kv_len - k0, kRowTile, D);

  T dk_acc[kRowsPerWarp][kChunks] = {}, dv_acc[kRowsPerWarp][kChunks] = {};  // the lane's d's
  // Causal: the query tiles from the one holding key k0 on see the keys.
  const int64_t q_first = p.causal ? k0 / kLaneTile * kLaneTile : 0;
  for (int64_t h = g * p.group; h < (g + 1) * p.group; ++h) {
    for (int64_t q0 = q_first; q0 < p.q_len; q0 += kLaneTile) {
      __syncthreads();  // the previous tile's q_s, dout_s, p_w and ds_w are read
      stage_rows(q_s, D + 1, q + at(ql, b, h, q0), ql.token, p.q_len - q0, kLaneTile, D);
      stage_rows(dout_s, D + 1, dout + at(ol, b, h, q0), ol.token, p.q_len - q0, kLaneTile, D);
      const int64_t stats = (b * p.heads + h) * p.q_len + q0;
      stage_values(lse_s, lse + stats, p.q_len - q0, kLaneTile);
      stage_values(dot_s, dot + stats, p.q_len - q0, kLaneTile);
      __syncthreads();
      // s_r = q_i . k_j and dp_r = dout_i . v_j for the lane's query i and the warp's keys j
      T s[kRowsPerWarp] = {}, dp[kRowsPerWarp] = {};
      const T* qi = q_s + lane * (D + 1);
      const T* douti = dout_s + lane * (D + 1);
      for (int d = 0; d < D; ++d) {
        const T qd = qi[d], gd = douti[d];
        for (int r = 0; r < kRowsPerWarp; ++r) {
          s[r] += qd * k_w[r * D + d];
          dp[r] += gd * v_w[r * D + d];
        }
      }
      const int64_t i = q0 + lane;
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const bool seen = sees(p, i, k0 + warp * kRowsPerWarp + r);
        const T prob = seen ? exp_of(p.scale * s[r] - lse_s[lane]) : T(0);  // P_ij
        p_w[r * kLaneTile + lane] = prob;
        ds_w[r * kLaneTile + lane] = seen ? prob * (dp[r] - dot_s[lane]) : T(0);  // dS_ij = P_ij (dP_ij - D_i)
      }
      __syncwarp();
      // dv_j += P_ij dout_i, dk_j += dS_ij q_i, queries in order
      const int queries = static_cast<int>(smaller(kLaneTile, p.q_len - q0));
      for (int ii = 0; ii < queries; ++ii) {
        for (int c = 0; c < kChunks; ++c) {
          const int d = lane + kWarp * c;
          if (d >= D) break;
          const T qd = q_s[ii * (D + 1) + d], gd = dout_s[ii * (D + 1) + d];
          for (int r = 0; r < kRowsPerWarp; ++r) {
            dv_acc[r][c] += p_w[r * kLaneTile + ii] * gd;
            dk_acc[r][c] += ds_w[r * kLaneTile + ii] * qd;
          }
        }
      }
    }
  }
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t j = k0 + warp * kRowsPerWarp + r;
    if (j >= p.kv_len) break;
    const int64_t dk_row = at(dkl, b, g, j), dv_row = at(dvl, b, g, j);
    for (int c = 0; c < kChunks; ++c) {
      const int d = lane + kWarp * c;
      if (d >= D) break;
      dk[dk_row + d] = p.scale * dk_acc[r][c];
      dv[dv_row + d] = dv_acc[r][c];
    }
  }
}

// dq (B, Hq, Tq, D) at dql = scale sum_j dS_ij k_j: block = (b, h, query tile).
template <class T, int kChunks>
__global__ void dq_kernel(T* dq, const T* dout, const T* q, const T* k, const T* v, const T* lse, const T* dot,
                          Problem<T> p, AttentionLayout ql, AttentionLayout kl, AttentionLayout vl,
                          AttentionLayout ol, AttentionLayout dql) {
  const int D = p.head_dim;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t tiles = tiles_of(p.q_len, kRowTile);
  const int64_t bh = blockIdx.x / tiles, h = bh % p.heads, b = bh / p.heads, kvh = h / p.group;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x % tiles) * kRowTile;
  const DqShared shared(D);
  T* q_s = dynamic_shared<T>() + shared.q;        // (kRowTile, D)
  T* dout_s = dynamic_shared<T>() + shared.dout;  // (kRowTile, D)
  T* k_s = dynamic_shared<T>() + shared.k;        // (kLaneTile, D + 1)
  T* v_s = dynamic_shared<T>() + shared.v;        // (kLaneTile, D + 1)
  T* lse_s = dynamic_shared<T>() + shared.lse;    // (kRowTile)
  T* dot_s = dynamic_shared<T>() + shared.dot;    // (kRowTile)
  T* ds_w = dynamic_shared<T>() + shared.ds + warp * kRowsPerWarp * kLaneTile;  // (kRowsPerWarp, kLaneTile)
  const T* q_w = q_s + warp * kRowsPerWarp * D;  // this warp's queries
  const T* dout_w = dout_s + warp * kRowsPerWarp * D;
  stage_rows(q_s, D, q + at(ql, b, h, q0), ql.token, p.q_len - q0, kRowTile, D);
  stage_rows(dout_s, D, dout + at(ol, b, h, q0), ol.token, p.q_len - q0, kRowTile, D);
  stage_values(lse_s, lse + bh * p.q_len + q0, p.q_len - q0, kRowTile);
  stage_values(dot_s, dot + bh * p.q_len + q0, p.q_len - q0, kRowTile);

  T acc[kRowsPerWarp][kChunks] = {};  // the lane's d's of sum_j dS_ij k_j
  const int64_t key_end = p.causal ? smaller(p.kv_len, q0 + kRowTile) : p.kv_len;
  for (int64_t k0 = 0; k0 < key_end; k0 += kLaneTile) {
    __syncthreads();  // the previous tile's k_s, v_s and ds_w are read
    stage_rows(k_s, D + 1, k + at(kl, b, kvh, k0), kl.token, p.kv_len - k0, kLaneTile, D);
    stage_rows(v_s, D + 1, v + at(vl, b, kvh, k0), vl.token, p.kv_len - k0, kLaneTile, D);
    __syncthreads();
    // s_r = q_i . k_j and dp_r = dout_i . v_j for the warp's queries i and the lane's key j
    T s[kRowsPerWarp] = {}, dp[kRowsPerWarp] = {};
    const T* kj = k_s + lane * (D + 1);
    const T* vj = v_s + lane * (D + 1);
    for (int d = 0; d < D; ++d) {
      const T kd = kj[d], vd = vj[d];
      for (int r = 0; r < kRowsPerWarp; ++r) {
        s[r] += q_w[r * D + d] * kd;
        dp[r] += dout_w[r * D + d] * vd;
      }
    }
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int row = warp * kRowsPerWarp + r;
      const bool seen = sees(p, q0 + row, k0 + lane);
      const T prob = seen ? exp_of(p.scale * s[r] - lse_s[row]) : T(0);       // P_ij, recomputed
      ds_w[r * kLaneTile + lane] = seen ? prob * (dp[r] - dot_s[row]) : T(0);  // dS_ij = P_ij (dP_ij - D_i)
    }
    __syncwarp();
    // dq_i += dS_ij k_j, keys in order
    const int keys = static_cast<int>(smaller(kLaneTile, p.kv_len - k0));
    for (int jj = 0; jj < keys; ++jj) {
      for (int c = 0; c < kChunks; ++c) {
        const int d = lane + kWarp * c;
        if (d >= D) break;
        const T kd = k_s[jj * (D + 1) + d];
        for (int r = 0; r < kRowsPerWarp; ++r) acc[r][c] += ds_w[r * kLaneTile + jj] * kd;
      }
    }
  }
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = q0 + warp * kRowsPerWarp + r;
    if (i >= p.q_len) break;
    const int64_t row = at(dql, b, h, i);
    for (int c = 0; c < kChunks; ++c) {
      const int d = lane + kWarp * c;
      if (d >= D) break;
      dq[row + d] = p.scale * acc[r][c];
    }
  }
}

// The dims every kernel here takes, or an error naming the bad ones.
void check_dims(const char* name, const AttentionDims& dims) {
  const auto refuse = [&](const std::string& what) { fail(name, what, __FILE__, __LINE__); };
  if (dims.batch < 0 || dims.heads < 0 || dims.kv_heads < 0 || dims.q_len < 0 || dims.kv_len < 0) {
    refuse("negative sizes: B " + std::to_string(dims.batch) + ", Hq " + std::to_string(dims.heads) + ", Hkv " +
           std::to_string(dims.kv_heads) + ", Tq " + std::to_string(dims.q_len) + ", Tk " +
           std::to_string(dims.kv_len));
  }
  if (dims.kv_heads == 0 ? dims.heads != 0 : dims.heads % dims.kv_heads != 0) {
    refuse("Hq = " + std::to_string(dims.heads) + " query heads is not a multiple of Hkv = " +
           std::to_string(dims.kv_heads) + " key/value heads");
  }
  if (dims.causal && dims.q_len != dims.kv_len) {
    refuse("causal attention needs Tq == Tk, got Tq = " + std::to_string(dims.q_len) + " and Tk = " +
           std::to_string(dims.kv_len));
  }
  if (dims.head_dim < 1 || dims.head_dim > kFlashMaxHeadDim) {
    refuse("head_dim D = " + std::to_string(dims.head_dim) + ": the CUDA kernels take 1 to " +
           std::to_string(kFlashMaxHeadDim));
  }
}

template <class T>
Problem<T> problem_of(const AttentionDims& dims) {
  return {dims.heads,          dims.kv_heads, dims.q_len, dims.kv_len, static_cast<int>(dims.head_dim),
          dims.kv_heads ? dims.heads / dims.kv_heads : 1, dims.causal, static_cast<T>(dims.scale)};
}

// f(std::integral_constant<int, kChunks>) with kChunks 1, 2, 4 or 8: the
// fewest chunks of 32 that hold D.
template <class F>
void with_chunks(int64_t head_dim, F f) {
  if (head_dim <= 32) return f(std::integral_constant<int, 1>{});
  if (head_dim <= 64) return f(std::integral_constant<int, 2>{});
  if (head_dim <= 128) return f(std::integral_constant<int, 4>{});
  return f(std::integral_constant<int, 8>{});
}

// kernel over `blocks` blocks of kBlockThreads with `shared` elements of T of
// dynamic shared memory, raising the kernel's limit where it is above 48 KB.
template <class T, class... Params, class... Args>
void launch_tiles(const char* name, void (*kernel)(Params...), int64_t blocks, int64_t shared, Stream stream,
                  Args... args) {
  if (blocks > INT_MAX) {
    fail(name, std::to_string(blocks) + " blocks, more than a grid's 2^31 - 1", __FILE__, __LINE__);
  }
  const size_t bytes = static_cast<size_t>(shared) * sizeof(T);
  if (bytes > kDefaultSharedBytes) {
    REMAT_CUDA_CHECK(cudaSetDevice(stream.device));
    REMAT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  }
  launch(name, kernel, {dim3(static_cast<unsigned>(blocks)), dim3(kBlockThreads), bytes}, stream, args...);
}

}  // namespace

template <class T>
void flash_attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionDims& dims,
                             AttentionLayout q_layout, AttentionLayout k_layout, AttentionLayout v_layout,
                             AttentionLayout out_layout, Stream stream) {
  check_dims("flash_attention_forward", dims);
  const int64_t blocks = dims.batch * dims.heads * tiles_of(dims.q_len, kRowTile);
  if (blocks == 0) return;
  const Problem<T> p = problem_of<T>(dims);
  with_chunks(dims.head_dim, [&](auto chunks) {
    launch_tiles<T>("flash_attention_forward", forward_kernel<T, decltype(chunks)::value>, blocks,
                    ForwardShared(dims.head_dim).total, stream, out, lse, q, k, v, p, q_layout, k_layout, v_layout,
                    out_layout);
  });
}

template <class T>
void flash_attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                              const T* lse, const AttentionDims& dims, AttentionLayout q_layout,
                              AttentionLayout k_layout, AttentionLayout v_layout, AttentionLayout out_layout,
                              AttentionGradLayouts grad_layouts, Stream stream) {
  check_dims("flash_attention_backward", dims);
  const int64_t rows = dims.batch * dims.heads * dims.q_len;
  const int64_t dkdv_blocks = dims.batch * dims.kv_heads * tiles_of(dims.kv_len, kRowTile);
  const int64_t dq_blocks = dims.batch * dims.heads * tiles_of(dims.q_len, kRowTile);
  if (dkdv_blocks == 0 && dq_blocks == 0) return;
  const Problem<T> p = problem_of<T>(dims);
  const ScratchLease lease =
      scratch_on(stream, Scratch::FlashAttentionRowDots, static_cast<size_t>(std::max<int64_t>(rows, 1)) * sizeof(T));
  T* dot = lease.as<T>();  // (B, Hq, Tq)
  rowwise::launch_rows("flash_attention_row_dots_warp_rows", "flash_attention_row_dots_block_rows",
                       RowDot<T>{dot, dout, out, out_layout, dims.heads, dims.q_len, dims.head_dim}, rows,
                       dims.head_dim, stream);
  with_chunks(dims.head_dim, [&](auto chunks) {
    constexpr int kChunks = decltype(chunks)::value;
    if (dkdv_blocks > 0) {
      launch_tiles<T>("flash_attention_backward_dk_dv", dk_dv_kernel<T, kChunks>, dkdv_blocks,
                      DkDvShared(dims.head_dim).total, stream, dk, dv, dout, q, k, v, lse,
                      static_cast<const T*>(dot), p, q_layout, k_layout, v_layout, out_layout, grad_layouts.dk,
                      grad_layouts.dv);
    }
    if (dq_blocks > 0) {
      launch_tiles<T>("flash_attention_backward_dq", dq_kernel<T, kChunks>, dq_blocks, DqShared(dims.head_dim).total,
                      stream, dq, dout, q, k, v, lse, static_cast<const T*>(dot), p, q_layout, k_layout, v_layout,
                      out_layout, grad_layouts.dq);
    }
  });
}

#define REMAT_INSTANTIATE_FLASH_ATTENTION(T)                                                                        \
  template void flash_attention_forward<T>(T*, T*, const T*, const T*, const T*, const AttentionDims&,              \
                                           AttentionLayout, AttentionLayout, AttentionLayout, AttentionLayout,      \
                                           Stream);                                                                 \
  template void flash_attention_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*, \
                                            const AttentionDims&, AttentionLayout, AttentionLayout, AttentionLayout, \
                                            AttentionLayout, AttentionGradLayouts, Stream);
REMAT_INSTANTIATE_FLASH_ATTENTION(float)
REMAT_INSTANTIATE_FLASH_ATTENTION(double)
#undef REMAT_INSTANTIATE_FLASH_ATTENTION

}  // namespace remat::kernels::cuda
