// The emulated GPU's one GEMM, shared by its cuBLAS (cublas.cpp, where it is
// defined) and its cuBLASLt (cublaslt.cpp): column-major, cuBLAS's argument
// meaning, computed on the host. Not for device code or remat's callers.
#pragma once

#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>

namespace remat_emulation {

// The bytes a column-major (rows, cols) operand with leading dimension ld spans.
size_t span_bytes(int64_t rows, int64_t cols, int64_t ld, size_t element);

// C = alpha op(A) op(B) + beta C (m x n, column-major) by BLIS told the
// column-major strides; with k = 0 or alpha = 0, C = beta C, and with
// beta = 0 C is written, never read. With tf32 (float only) A and B are read
// rounded to TF32 (cvt.rna.tf32.f32), as the tensor cores read them.
template <class T>
void reference_gemm(cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, T alpha, const T* a,
                    int lda, const T* b, int ldb, T beta, T* c, int ldc, bool tf32);

}  // namespace remat_emulation
