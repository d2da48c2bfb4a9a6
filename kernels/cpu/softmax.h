// Softmax family on dense (outer, n, inner) arrays, normalising over n, and
// cross-entropy on dense (rows, classes) logits with int64 targets.
#pragma once

#include <cstdint>

#include "kernels/cpu/host.h"

namespace remat::kernels::cpu {

template <class T> void softmax_forward(T* out, const T* x, int64_t outer, int64_t n, int64_t inner, Host = {});
// dx = out * (dout - sum_n(dout * out)); dx may be dout (each row is read
// whole before it is written), as in log_softmax_backward.
template <class T> void softmax_backward(T* dx, const T* dout, const T* out, int64_t outer, int64_t n, int64_t inner, Host = {});
template <class T> void log_softmax_forward(T* out, const T* x, int64_t outer, int64_t n, int64_t inner, Host = {});
// dx = dout - exp(out) * sum_n(dout)
template <class T> void log_softmax_backward(T* dx, const T* dout, const T* out, int64_t outer, int64_t n, int64_t inner, Host = {});

// Cross-entropy without a (rows, classes) buffer. Forward writes per row r
// its statistics stats[2r] = m, the row's maximum, and stats[2r + 1] =
// log(sum_c exp(logits[r, c] - m)), kept apart (not their sum) so that the
// log-probability (x - m) - log_sum has log_softmax_forward's bits, and
// returns the summed loss -logp[r, t_r] over rows whose target is not
// ignore_index, with their number in *count. A target outside [0, classes)
// that is not ignore_index makes it return false with *bad_row set.
template <class T>
bool cross_entropy_forward(double* loss_sum, int64_t* count, T* stats, int64_t* bad_row, const T* logits,
                           const int64_t* targets, int64_t rows, int64_t classes, int64_t ignore_index, Host = {});
// dlogits = scale * (softmax(logits) - onehot(target)) for counted rows, 0
// for ignored ones, softmax recomputed from logits and stats in the same
// pass: one read of logits, one write. dlogits may be logits (each element
// is read before it is written).
template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* stats, const int64_t* targets, int64_t rows,
                            int64_t classes, int64_t ignore_index, T scale, Host = {});

}  // namespace remat::kernels::cpu
