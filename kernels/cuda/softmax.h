// The CUDA twins of kernels/cpu/softmax.h: softmax and log_softmax along the
// middle axis of (outer, n, inner), and cross-entropy with ignore_index.
#pragma once

#include <cstdint>

#include "kernels/cuda/runtime.h"

namespace remat::kernels::cuda {

template <class T> void softmax_forward(T* out, const T* x, int64_t outer, int64_t n, int64_t inner, Stream stream);
template <class T>
void softmax_backward(T* dx, const T* dout, const T* out, int64_t outer, int64_t n, int64_t inner, Stream stream);
template <class T> void log_softmax_forward(T* out, const T* x, int64_t outer, int64_t n, int64_t inner, Stream stream);
template <class T>
void log_softmax_backward(T* dx, const T* dout, const T* out, int64_t outer, int64_t n, int64_t inner, Stream stream);
// stats (rows, 2) = per row its maximum m and log(sum exp(x - m)), as the
// CPU's; on the host: loss_sum = -sum of the log-probabilities (x_t - m) -
// log_sum over rows whose target is not ignore_index, count = their number;
// false (and bad_row) for a target outside [0, classes). No (rows, classes)
// buffer. Waits for `stream`.
template <class T>
bool cross_entropy_forward(double* loss_sum, int64_t* count, T* stats, int64_t* bad_row, const T* logits,
                           const int64_t* targets, int64_t rows, int64_t classes, int64_t ignore_index, Stream stream);
// dlogits[r, c] = scale (exp((x - m) - log_sum) - [c == t_r]); 0 on ignored
// rows. One read of logits, one write; dlogits may be logits.
template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* stats, const int64_t* targets, int64_t rows,
                            int64_t classes, int64_t ignore_index, T scale, Stream stream);

}  // namespace remat::kernels::cuda
