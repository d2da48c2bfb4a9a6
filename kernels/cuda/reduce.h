// The CUDA twins of kernels/cpu/reduce.h. Every sum is taken by one thread
// in a fixed order (or by fixed blocks added in order), never with float
// atomics: a run repeats bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

// out (out_numel, dense over the kept axes) = the sum of `in` over the axes
// where out_strides is 0.
template <class T>
void sum_to(T* out, int64_t out_numel, const T* in, const std::vector<int64_t>& in_strides,
            const std::vector<int64_t>& out_strides, const std::vector<int64_t>& shape, Stream stream);
// The chunks a column sum over (rows, n) cuts its rows into (sum_to over
// leading axes, layer_norm_backward's dweight and dbias; Note [Column sums
// in chunks] in reduce.cuh): 1 is one pass, more a second pass adding the
// chunks' partial sums in order. A function of the shape alone.
int64_t column_sum_chunks(int64_t rows, int64_t n);
// values, indices (outer, inner) <- max over n of x (outer, n, inner); ties
// go to the first index, NaN wins over numbers (as on the CPU).
template <class T>
void max_along(T* values, int64_t* indices, const T* x, int64_t outer, int64_t n, int64_t inner, Stream stream);
template <class T>
void max_along_backward(T* dx, const int64_t* indices, const T* dout, int64_t outer, int64_t n, int64_t inner,
                        Stream stream);

// sum of x[i]^2 over x (n), accumulated in double; waits for `stream` (the
// host reads the sum). The same every run: fixed blocks, partial sums added
// in block order.
template <class T>
double squared_norm(const T* x, int64_t n, Stream stream);

}  // namespace remat::kernels::cuda
