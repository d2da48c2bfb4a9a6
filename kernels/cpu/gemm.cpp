// gemm: float32 through BLIS or oneDNN, as gemm_library.cpp chose for this
// CPU, float64 through BLIS (Note [GEMM library] in gemm_library.h); BLIS
// through its own interface, which takes row and column strides (a row-
// major matrix is rs = ld, cs = 1; a transposed operand is its transpose
// flag), oneDNN through dnnl_sgemm, row-major (a narrow transposed B copied
// to (K, N) first: its NN kernel is the faster); the batched form over
// broadcast strides, and linear's bias rows.
//
// Threads are remat's, not the libraries': C is cut into blocks, and each
// OpenMP thread runs single-threaded library calls on its blocks. BLIS's
// own threads wait for each other in spinning barriers: with more threads
// than free cores (two programs on two cores, ctest -j2, MPI ranks) a GEMM
// ran 30 to 60 times slower, while OpenMP's threads sleep when they wait
// (measured in docs/gemm.md). oneDNN (its OpenMP build) runs as many
// threads as OpenMP's count outside a parallel region and one inside, so a
// call outside one runs with the calling thread's count set to 1 for it.
// A GEMM called inside a parallel region runs on the calling thread alone.
//
// The bits: each element of C is summed by one single-threaded call. BLIS
// sums it in the same order whatever block holds it, so its blocks are one
// per thread. oneDNN's order depends on the block's shape (it takes a
// copy-based or a no-copy kernel by M, N and the leading dimensions: at
// 2304 x 768 x 1024 with A transposed, one call and two halves of C differ
// in 92% of the elements), so its blocks are cut from the shape alone and
// the threads share them: the same blocks and the same bits on any thread
// count, inside a parallel region or not.
#include "kernels/cpu/gemm.h"

#include <blis.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/gemm_blis.h"
#include "kernels/cpu/gemm_library.h"
#include "kernels/cpu/parallel.h"
#include "kernels/shapes.h"

namespace remat::kernels::cpu {
namespace {

// C (M, N, row stride ldc) = beta * C: the empty sum, which BLIS is not
// asked; with beta = 0, C is written, never read.
template <class T>
void scale_matrix(T* c, int64_t m, int64_t n, int64_t ldc, T beta) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
  }
}

// One BLIS call on the calling thread alone.
template <class T>
void blis_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
               const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  rntm_t rntm;
  bli_rntm_init_from_global(&rntm);
  bli_rntm_set_num_threads(1, &rntm);
  const trans_t ta = trans_a ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, tb = trans_b ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE;
  if constexpr (std::is_same_v<T, float>) {
    bli_sgemm_ex(ta, tb, m, n, k, &alpha, const_cast<T*>(a), lda, 1, const_cast<T*>(b), ldb, 1, &beta, c, ldc, 1,
                 nullptr, &rntm);
  } else {
    bli_dgemm_ex(ta, tb, m, n, k, &alpha, const_cast<T*>(a), lda, 1, const_cast<T*>(b), ldb, 1, &beta, c, ldc, 1,
                 nullptr, &rntm);
  }
}

// Below this many multiply-adds a GEMM stays on one thread: a parallel
// region costs microseconds, and halving a small block slows its kernel.
constexpr int64_t kParallelMacs = int64_t{1} << 18;
// Blocks are cut at multiples of this many rows or columns, so that the
// kernels' tiles (6 x 16 for haswell, 32 x 12 for skx) stay whole but at
// the block's last edge.
constexpr int64_t kBlockUnit = 16;

template <class T>
void blis_threaded(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                   const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  ensure_blis_started();
  const int threads = omp_in_parallel() || m * n * k < kParallelMacs ? 1 : num_threads();
  if (threads == 1) return blis_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const bool by_rows = m >= n;  // cut the longer side of C
  const int64_t units = ((by_rows ? m : n) + kBlockUnit - 1) / kBlockUnit;
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), count = omp_get_num_threads();
    const int64_t begin = std::min(units * t / count * kBlockUnit, by_rows ? m : n);
    const int64_t end = std::min(units * (t + 1) / count * kBlockUnit, by_rows ? m : n);
    if (begin < end && by_rows) {  // rows [begin, end) of C and of op(A)
      blis_gemm(trans_a, trans_b, end - begin, n, k, alpha, trans_a ? a + begin : a + begin * lda, lda, b, ldb, beta,
                c + begin * ldc, ldc);
    } else if (begin < end) {  // columns [begin, end) of C and of op(B)
      blis_gemm(trans_a, trans_b, m, end - begin, k, alpha, a, lda, trans_b ? b + begin * ldb : b + begin, ldb, beta,
                c + begin, ldc);
    }
  }
}


// One oneDNN call on the calling thread alone (OpenMP's count is 1 inside
// a parallel region; outside, OneOpenMpThread makes it 1). Returns oneDNN's
// status. A matrix stored as one row never steps by its leading dimension,
// which oneDNN still asks to be at least the row's length.
dnnl_status_t onednn_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if ((trans_a ? k : m) == 1) lda = std::max(lda, trans_a ? m : k);
  if ((trans_b ? n : k) == 1) ldb = std::max(ldb, trans_b ? k : n);
  if (m == 1) ldc = std::max(ldc, n);
  return dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// OpenMP's thread count set to 1 on the calling thread for a scope, outside
// a parallel region (the count is the calling thread's own: other threads
// do not see it); inside one it is left alone.
class OneOpenMpThread {
 public:
  OneOpenMpThread() : previous_(omp_in_parallel() ? 0 : omp_get_max_threads()) {
    if (previous_ > 0) omp_set_num_threads(1);
  }
  ~OneOpenMpThread() {
    if (previous_ > 0) omp_set_num_threads(previous_);
  }
  OneOpenMpThread(const OneOpenMpThread&) = delete;
  OneOpenMpThread& operator=(const OneOpenMpThread&) = delete;

 private:
  int previous_;
};

// oneDNN's blocks are at most this many rows by this many columns of C,
// one call each. Not 512: dnnl_sgemm takes its no-copy kernel for any M x
// N with 1/M + 1/N >= 0.00196 (every block under 1024 x 1024), and that
// kernel slows where B's rows lie 4 KiB apart (ldb = 1024 floats: W2's c_fc
// forward, 2048 x 1024 x 256 NN, ran at 84-89 GFLOP/s in 512 x 512 blocks
// and 105-107 in 1024 x 1024 ones, its copy-based kernel); the other
// products ran as fast in 1024-blocks or faster (docs/gemm.md).
constexpr int64_t kOnednnBlock = 1024;

// From this many multiply-adds a product is cut into an even number of
// blocks, so that two threads share them evenly (a product that fits one
// block is halved). Below it (attention's per-head products, 2^20), one
// call: halving a 128 x 128 block slows it more than a thread gains.
constexpr int64_t kOnednnEvenMacs = int64_t{1} << 22;

// Piece i of `count` along a side of `size`, cut at multiples of kBlockUnit.
std::pair<int64_t, int64_t> piece(int64_t size, int64_t count, int64_t i) {
  const int64_t units = (size + kBlockUnit - 1) / kBlockUnit;
  return {std::min(units * i / count * kBlockUnit, size), std::min(units * (i + 1) / count * kBlockUnit, size)};
}

// oneDNN's blocks of an M x N x K product: `rows` pieces of M by `cols`
// pieces of N, from the shape alone, never from the thread count.
struct BlockGrid {
  int64_t rows = 1, cols = 1;
};

BlockGrid onednn_blocks(int64_t m, int64_t n, int64_t k) {
  if (m * n * k < kParallelMacs) return {};
  BlockGrid grid{.rows = (m + kOnednnBlock - 1) / kOnednnBlock, .cols = (n + kOnednnBlock - 1) / kOnednnBlock};
  if (m * n * k >= kOnednnEvenMacs && grid.rows * grid.cols % 2 == 1) {
    // Halve the blocks along their longer side (rows where square):
    // 1024 x 2304 becomes 2 x 3 blocks of 512 x 768, 256 x 1024 two of 256 x 512.
    if (m * grid.cols >= n * grid.rows) {
      grid.rows *= 2;
    } else {
      grid.cols *= 2;
    }
  }
  return grid;
}

// A transposed B of at most this many elements is copied into (K, N)
// row-major, for N up to kTransposeColumns and M from kTransposeRows:
// oneDNN's no-copy kernel (which blocks this narrow take) ran W2's dx
// (2048 x 256 x 256..1024 NT) and a Llama's 384-wide forward 2-6% faster as
// NN, the copy included (1-2% of the product, at M >= 1024); at N = 768 it
// gained nothing, at N = 1024 (copy-based kernel) it lost 2% (docs/gemm.md).
constexpr int64_t kTransposeColumns = 512;
constexpr int64_t kTransposeRows = 1024;
constexpr int64_t kTransposeElements = int64_t{1} << 22;  // 16 MiB

bool transpose_b_first(bool trans_b, int64_t m, int64_t n, int64_t k) {
  return trans_b && n <= kTransposeColumns && m >= kTransposeRows && n * k <= kTransposeElements;
}

// bt (K, N) = b^T for b (N, K) with row stride ldb, in 16 x 16 tiles (one
// cache line of each); on `threads` threads, each writing its own columns.
void transpose_into(const float* b, int64_t n, int64_t k, int64_t ldb, float* bt, int threads) {
  constexpr int64_t kTile = 16;
  const int64_t column_tiles = (n + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t t = 0; t < column_tiles; ++t) {
    const int64_t j0 = t * kTile, j1 = std::min(j0 + kTile, n);
    for (int64_t p0 = 0; p0 < k; p0 += kTile) {
      const int64_t p1 = std::min(p0 + kTile, k);
      for (int64_t p = p0; p < p1; ++p) {
        for (int64_t j = j0; j < j1; ++j) bt[p * n + j] = b[j * ldb + p];
      }
    }
  }
}

void onednn_threaded(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                     int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (transpose_b_first(trans_b, m, n, k)) {
    // One buffer per thread, kept between calls (at most 16 MiB each).
    thread_local std::vector<float> transposed;
    transposed.resize(static_cast<size_t>(std::max(transposed.size(), static_cast<size_t>(n * k))));
    const int threads = omp_in_parallel() ? 1 : num_threads();
    transpose_into(b, n, k, ldb, transposed.data(), threads);
    return onednn_threaded(trans_a, false, m, n, k, alpha, a, lda, transposed.data(), n, beta, c, ldc);
  }
  const BlockGrid grid = onednn_blocks(m, n, k);  // named: clang 14 cannot capture a structured binding
  const int64_t rows = grid.rows, cols = grid.cols;
  const int64_t blocks = rows * cols;
  std::atomic<int> failed{dnnl_success};
  auto block = [&](int64_t i) {
    const auto [r0, r1] = piece(m, rows, i / cols);  // rows [r0, r1) of C and op(A)
    const auto [c0, c1] = piece(n, cols, i % cols);  // columns [c0, c1) of C and op(B)
    const dnnl_status_t status = onednn_gemm(trans_a, trans_b, r1 - r0, c1 - c0, k, alpha,
                                             trans_a ? a + r0 : a + r0 * lda, lda, trans_b ? b + c0 * ldb : b + c0,
                                             ldb, beta, c + r0 * ldc + c0, ldc);
    if (status != dnnl_success) failed = status;
  };
  const int threads = omp_in_parallel() ? 1 : static_cast<int>(std::min<int64_t>(num_threads(), blocks));
  if (threads > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < blocks; ++i) block(i);
  } else {
    const OneOpenMpThread one;
    for (int64_t i = 0; i < blocks; ++i) block(i);
  }
  if (failed != dnnl_success) {
    throw std::invalid_argument("gemm: oneDNN's dnnl_sgemm failed (status " + std::to_string(failed.load()) +
                                ") for " + std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k) +
                                ", trans_a " + std::to_string(trans_a) + ", trans_b " + std::to_string(trans_b) +
                                ", lda " + std::to_string(lda) + ", ldb " + std::to_string(ldb) + ", ldc " +
                                std::to_string(ldc));
  }
}

}  // namespace

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc, Host) {
  const GemmLibrary library = float32_gemm_library();  // before anything: a bad REMAT_GEMM is an error
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_matrix(c, m, n, ldc, beta);
  if constexpr (std::is_same_v<T, float>) {
    if (library == GemmLibrary::OneDnn) return onednn_threaded(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
                                                               c, ldc);
  }
  blis_threaded(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <class T>
void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                  const std::vector<int64_t>& a_strides, int64_t lda, const T* b, const std::vector<int64_t>& b_strides,
                  int64_t ldb, T* c, const std::vector<int64_t>& batch, Host) {
  float32_gemm_library();  // a bad REMAT_GEMM throws here, not inside the parallel loop below
  int64_t count = 1;
  for (int64_t size : batch) count *= size;
  if (count == 0 || m == 0 || n == 0) return;
  if (k == 0) return std::fill(c, c + count * m * n, T(0));
  const BatchOffsets offsets = batch_offsets(batch, a_strides, b_strides);
  auto one = [&](int64_t i) {
    gemm<T>(trans_a, trans_b, m, n, k, alpha, a + offsets.a[static_cast<size_t>(i)], lda,
            b + offsets.b[static_cast<size_t>(i)], ldb, T(0), c + i * m * n, n);
  };
  // Small matrices (attention's per-head products) are too small for a
  // GEMM to use threads well; split the batch over the threads instead,
  // each running single-threaded GEMMs (gemm_threaded above sees it is
  // inside a parallel region).
  const int threads = num_threads();
  if (threads > 1 && count >= threads && m * n * k <= (int64_t{1} << 21)) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) one(i);
  } else {
    for (int64_t i = 0; i < count; ++i) one(i);
  }
}

// Split over rows (repeat_rows) or columns (sum_rows) where the matrix is
// large: single-threaded, W2's bias rows and bias gradients took 2% of a
// step on one thread and did not get faster on two. Each column still sums
// its rows in order, so the bits do not depend on the threads.
template <class T>
void repeat_rows(T* out, const T* row, int64_t rows, int64_t n, Host) {
  const bool split = num_threads() > 1 && !omp_in_parallel() && rows * n >= 2 * kParallelGrain;
#pragma omp parallel for schedule(static) if (split)
  for (int64_t r = 0; r < rows; ++r) std::memcpy(out + r * n, row, n * sizeof(T));
}

template <class T>
void sum_rows(T* out, const T* x, int64_t rows, int64_t n, Host) {
  const bool split = num_threads() > 1 && !omp_in_parallel() && rows * n >= 2 * kParallelGrain && n >= 2 * kBlockUnit;
#pragma omp parallel if (split)
  {
    const std::pair<int64_t, int64_t> columns = piece(n, omp_get_num_threads(), omp_get_thread_num());
    const int64_t begin = columns.first, end = columns.second;  // not a binding: clang 14's omp simd cannot use one
    std::fill(out + begin, out + end, T(0));
    for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
      for (int64_t j = begin; j < end; ++j) out[j] += x[r * n + j];
    }
  }
}

#define REMAT_INSTANTIATE_GEMM(T)                                                                                  \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, int64_t, T, T*,     \
                        int64_t, Host);                                                                            \
  template void gemm_batched<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, const std::vector<int64_t>&,   \
                                int64_t, const T*, const std::vector<int64_t>&, int64_t, T*,                       \
                                const std::vector<int64_t>&, Host);                                                \
  template void repeat_rows<T>(T*, const T*, int64_t, int64_t, Host);                                              \
  template void sum_rows<T>(T*, const T*, int64_t, int64_t, Host);
REMAT_INSTANTIATE_GEMM(float)
REMAT_INSTANTIATE_GEMM(double)
#undef REMAT_INSTANTIATE_GEMM

}  // namespace remat::kernels::cpu
