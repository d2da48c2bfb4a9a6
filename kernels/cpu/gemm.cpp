// gemm: BLIS's sgemm and dgemm through its own interface, which takes row
// and column strides, so a row-major matrix is (rs = ld, cs = 1) and a
// transposed operand is BLIS's transpose flag (Note [GEMM library] in
// gemm_library.h); the batched form over broadcast strides, and linear's
// bias rows.
//
// Threads are remat's, not BLIS's: C is cut into one block of rows (or of
// columns, when it is wider than tall) per OpenMP thread, and each thread
// runs BLIS on one thread over its block. BLIS's own threads wait for each
// other in spinning barriers: with more threads than free cores (two
// programs on two cores, ctest -j2, MPI ranks) a GEMM ran 30 to 60 times
// slower, while OpenMP's threads sleep when they wait (measured in
// docs/gemm.md). Each element of C is then summed by one single-threaded
// BLIS call in the order it always uses, so a GEMM's bits do not depend on
// the thread count.
#include "kernels/cpu/gemm.h"

#include <blis.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/gemm_blis.h"
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
void gemm_threaded(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
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

}  // namespace

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc, Host) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_matrix(c, m, n, ldc, beta);
  gemm_threaded(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <class T>
void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                  const std::vector<int64_t>& a_strides, int64_t lda, const T* b, const std::vector<int64_t>& b_strides,
                  int64_t ldb, T* c, const std::vector<int64_t>& batch, Host) {
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

template <class T>
void repeat_rows(T* out, const T* row, int64_t rows, int64_t n, Host) {
  for (int64_t r = 0; r < rows; ++r) std::memcpy(out + r * n, row, n * sizeof(T));
}

template <class T>
void sum_rows(T* out, const T* x, int64_t rows, int64_t n, Host) {
  std::fill(out, out + n, T(0));
  for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) out[j] += x[r * n + j];
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
