// Softmax, log_softmax and cross-entropy on the GPU; see softmax.h.
//
// How the work is split, for rows along the middle axis of (outer, n, inner):
// - inner == 1 (the last axis: attention's rows, the LM head), n < 1024: a
//   WARP PER ROW. 256-thread blocks hold 8 warps, so 8 rows a block; the grid
//   (at most 4096 blocks) walks the rows with a grid-stride loop. Lane l
//   takes elements l, l + 32, l + 64, ... of its row, in that order, and the
//   32 lanes then combine their maxima and sums with a __shfl_xor_sync
//   butterfly (offsets 16, 8, 4, 2, 1).
// - inner == 1, n >= 1024 (the LM head's vocabulary): a BLOCK PER ROW, 256
//   threads: thread t takes elements t, t + 256, ... in order, each warp
//   combines its lanes with the butterfly, the 8 warp results go to shared
//   memory, and thread 0 adds them in warp order.
// - inner > 1: one thread a row, walking its n elements in order (rare;
//   neighbouring threads take rows that are neighbours in memory, so a
//   warp's reads are coalesced all the same).
// Each row is read in passes (max, then the sum of exp(x - max), then the
// output), every thread over the same elements each time.
//
// Why sums repeat bit for bit: which thread adds which elements, in which
// order, and the shape of every combining tree depend only on (n, the path),
// never on timing or on the number of blocks (a row belongs to one warp or
// one block, whichever block that is); there are no atomics. The xor
// butterfly leaves every lane with the same bits (at each step both lanes of
// a pair combine the same two numbers, and IEEE addition is commutative, as
// is max_of below). Cross-entropy's loss is one number per row, added on the
// host in row order, as the CPU does.
//
// Cross-entropy writes no (rows, classes) buffer. Its forward is
// log_softmax's two reading passes (max, then the sum of exp(x - m)) on the
// same split, ending in each row's statistics, m and log(sum), kept apart as
// the CPU keeps them, and the row's loss term, written by the team's first
// thread. Its backward needs no reduction: the same split (a warp a row, a
// block from 1024) only assigns elements to threads, so a row's index comes
// from the team instead of a 64-bit division per element, and each element
// is read once and written once (in place over the logits when the op
// allows it: a thread writes only what it has just read).
#include "kernels/cuda/softmax.h"

#include <math.h>

#include <algorithm>
#include <vector>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/rows.cuh"

namespace remat::kernels::cuda {
namespace {

using namespace rowwise;  // rows.cuh: teams, their sums, launch_rows

// One row op each, for a team: row r is elements [r n, (r + 1) n).
template <class T>
struct SoftmaxForwardRow {
  using Value = T;
  T* out;
  const T* x;
  int64_t n;
  template <class Team>
  __device__ void operator()(const Team& team, int64_t r) const {
    const T* xr = x + r * n;
    T* orow = out + r * n;
    T m = lowest<T>();
    for (int64_t i = team.rank(); i < n; i += team.size()) m = max_of(m, xr[i]);
    m = team.max(m);
    T total = 0;
    for (int64_t i = team.rank(); i < n; i += team.size()) total += exp_of(xr[i] - m);
    const T inv = T(1) / team.sum(total);
    // exp(x - m) * inv: the bits of storing exp(x - m) and then scaling it.
    for (int64_t i = team.rank(); i < n; i += team.size()) orow[i] = exp_of(xr[i] - m) * inv;
  }
};

template <class T>
struct LogSoftmaxForwardRow {
  using Value = T;
  T* out;
  const T* x;
  int64_t n;
  template <class Team>
  __device__ void operator()(const Team& team, int64_t r) const {
    const T* xr = x + r * n;
    T* orow = out + r * n;
    T m = lowest<T>();
    for (int64_t i = team.rank(); i < n; i += team.size()) m = max_of(m, xr[i]);
    m = team.max(m);
    T total = 0;
    for (int64_t i = team.rank(); i < n; i += team.size()) total += exp_of(xr[i] - m);
    const T log_total = log_of(team.sum(total));  // (x - m) - log(total), as on the CPU
    for (int64_t i = team.rank(); i < n; i += team.size()) orow[i] = (xr[i] - m) - log_total;
  }
};

template <class T>
struct SoftmaxBackwardRow {
  using Value = T;
  T* dx;
  const T* dout;
  const T* out;
  int64_t n;
  template <class Team>
  __device__ void operator()(const Team& team, int64_t r) const {
    const T* g = dout + r * n;
    const T* y = out + r * n;
    T dot = 0;
    for (int64_t i = team.rank(); i < n; i += team.size()) dot += g[i] * y[i];
    dot = team.sum(dot);
    // Each thread writes only the elements it read: dx may be dout.
    for (int64_t i = team.rank(); i < n; i += team.size()) dx[r * n + i] = y[i] * (g[i] - dot);
  }
};

template <class T>
struct LogSoftmaxBackwardRow {
  using Value = T;
  T* dx;
  const T* dout;
  const T* out;
  int64_t n;
  template <class Team>
  __device__ void operator()(const Team& team, int64_t r) const {
    const T* g = dout + r * n;
    const T* y = out + r * n;
    T total = 0;
    for (int64_t i = team.rank(); i < n; i += team.size()) total += g[i];
    total = team.sum(total);
    for (int64_t i = team.rank(); i < n; i += team.size()) dx[r * n + i] = g[i] - exp_of(y[i]) * total;
  }
};

// Cross-entropy's forward for row r: the statistics of LogSoftmaxForwardRow
// (the same passes and reductions, so the same bits) into stats, and from
// the team's first thread the row's loss term and state: 1 counted, 0
// ignored, -1 a target outside [0, n).
template <class T>
struct CrossEntropyForwardRow {
  using Value = T;
  T* stats;                // (rows, 2): m, log_sum
  double* losses;          // (rows)
  int* status;             // (rows)
  const T* logits;         // (rows, n)
  const int64_t* targets;  // (rows)
  int64_t n;
  int64_t ignore_index;
  template <class Team>
  __device__ void operator()(const Team& team, int64_t r) const {
    const T* xr = logits + r * n;
    T m = lowest<T>();
    for (int64_t i = team.rank(); i < n; i += team.size()) m = max_of(m, xr[i]);
    m = team.max(m);
    T total = 0;
    for (int64_t i = team.rank(); i < n; i += team.size()) total += exp_of(xr[i] - m);
    const T log_sum = log_of(team.sum(total));
    if (team.rank() != 0) return;
    stats[2 * r] = m;
    stats[2 * r + 1] = log_sum;
    const int64_t t = targets[r];
    if (t == ignore_index) {
      losses[r] = 0;
      status[r] = 0;
    } else if (t < 0 || t >= n) {
      losses[r] = 0;
      status[r] = -1;
    } else {
      losses[r] = -static_cast<double>((xr[t] - m) - log_sum);  // -log_softmax(x)[t], as the CPU rounds it
      status[r] = 1;
    }
  }
};

// d(-log softmax(x)[t])/dx = softmax(x) - onehot(t), times scale; softmax
// recomputed from the forward's statistics. Each thread writes only the
// elements it has read: dlogits may be logits.
template <class T>
struct CrossEntropyBackwardRow {
  using Value = T;
  T* dlogits;              // (rows, n)
  const T* logits;         // (rows, n)
  const T* stats;          // (rows, 2)
  const int64_t* targets;  // (rows)
  int64_t n;
  int64_t ignore_index;
  T scale;
  template <class Team>
  __device__ void operator()(const Team& team, int64_t r) const {
    const T* xr = logits + r * n;
    T* dr = dlogits + r * n;
    const int64_t t = targets[r];
    if (t == ignore_index) {
      for (int64_t i = team.rank(); i < n; i += team.size()) dr[i] = T(0);
      return;
    }
    const T m = stats[2 * r], log_sum = stats[2 * r + 1];
    for (int64_t i = team.rank(); i < n; i += team.size()) {
      const T p = scale * exp_of((xr[i] - m) - log_sum);
      dr[i] = i == t ? p - scale : p;
    }
  }
};

template <class T>
__device__ inline T strided_row_max(const T* x, int64_t n, int64_t s) {
  T m = x[0];
  for (int64_t i = 1; i < n; ++i) m = max_of(m, x[i * s]);
  return m;
}

}  // namespace

template <class T> void softmax_forward(T* out, const T* x, int64_t outer, int64_t n, int64_t inner, Stream stream) {
  if (inner == 1) {
    return launch_rows("softmax_forward_warp_rows", "softmax_forward_block_rows", SoftmaxForwardRow<T>{out, x, n},
                       outer, n, stream);
  }
  launch_elementwise(outer * inner, stream, [=] __device__(int64_t row) {
    const int64_t base = row / inner * n * inner + row % inner;
    const T m = strided_row_max(x + base, n, inner);
    T total = 0;
    for (int64_t i = 0; i < n; ++i) {
      out[base + i * inner] = exp_of(x[base + i * inner] - m);
      total += out[base + i * inner];
    }
    const T inv = T(1) / total;
    for (int64_t i = 0; i < n; ++i) out[base + i * inner] *= inv;
  });
}

template <class T>
void softmax_backward(T* dx, const T* dout, const T* out, int64_t outer, int64_t n, int64_t inner, Stream stream) {
  if (inner == 1) {
    return launch_rows("softmax_backward_warp_rows", "softmax_backward_block_rows",
                       SoftmaxBackwardRow<T>{dx, dout, out, n}, outer, n, stream);
  }
  launch_elementwise(outer * inner, stream, [=] __device__(int64_t row) {
    const int64_t base = row / inner * n * inner + row % inner;
    T dot = 0;
    for (int64_t i = 0; i < n; ++i) dot += dout[base + i * inner] * out[base + i * inner];
    for (int64_t i = 0; i < n; ++i) dx[base + i * inner] = out[base + i * inner] * (dout[base + i * inner] - dot);
  });
}

template <class T> void log_softmax_forward(T* out, const T* x, int64_t outer, int64_t n, int64_t inner, Stream stream) {
  if (inner == 1) {
    return launch_rows("log_softmax_forward_warp_rows", "log_softmax_forward_block_rows",
                       LogSoftmaxForwardRow<T>{out, x, n}, outer, n, stream);
  }
  launch_elementwise(outer * inner, stream, [=] __device__(int64_t row) {
    const int64_t base = row / inner * n * inner + row % inner;
    const T m = strided_row_max(x + base, n, inner);
    T total = 0;
    for (int64_t i = 0; i < n; ++i) total += exp_of(x[base + i * inner] - m);
    const T log_total = log_of(total);  // (x - m) - log(total), as on the CPU
    for (int64_t i = 0; i < n; ++i) out[base + i * inner] = (x[base + i * inner] - m) - log_total;
  });
}

template <class T>
void log_softmax_backward(T* dx, const T* dout, const T* out, int64_t outer, int64_t n, int64_t inner, Stream stream) {
  if (inner == 1) {
    return launch_rows("log_softmax_backward_warp_rows", "log_softmax_backward_block_rows",
                       LogSoftmaxBackwardRow<T>{dx, dout, out, n}, outer, n, stream);
  }
  launch_elementwise(outer * inner, stream, [=] __device__(int64_t row) {
    const int64_t base = row / inner * n * inner + row % inner;
    T total = 0;
    for (int64_t i = 0; i < n; ++i) total += dout[base + i * inner];
    for (int64_t i = 0; i < n; ++i) {
      dx[base + i * inner] = dout[base + i * inner] - exp_of(out[base + i * inner]) * total;
    }
  });
}

template <class T>
bool cross_entropy_forward(double* loss_sum, int64_t* count, T* stats, int64_t* bad_row, const T* logits,
                           const int64_t* targets, int64_t rows, int64_t classes, int64_t ignore_index, Stream stream) {
  *loss_sum = 0;
  *count = 0;
  if (rows == 0) return true;
  // Per-row losses and states, summed on the host in row order (as the CPU).
  const ScratchLease losses_lease =
      scratch_on(stream, Scratch::CrossEntropyLosses, static_cast<size_t>(rows) * sizeof(double));
  const ScratchLease status_lease = scratch_on(stream, Scratch::CrossEntropyStatus, static_cast<size_t>(rows) * sizeof(int));
  double* losses = losses_lease.as<double>();
  int* status = status_lease.as<int>();
  launch_rows("cross_entropy_forward_warp_rows", "cross_entropy_forward_block_rows",
              CrossEntropyForwardRow<T>{stats, losses, status, logits, targets, classes, ignore_index}, rows, classes,
              stream);
  std::vector<double> host_losses(static_cast<size_t>(rows));
  std::vector<int> host_status(static_cast<size_t>(rows));
  copy_device_to_host(host_losses.data(), losses, host_losses.size() * sizeof(double), stream);
  copy_device_to_host(host_status.data(), status, host_status.size() * sizeof(int), stream);
  double total = 0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (host_status[static_cast<size_t>(r)] < 0) {
      *bad_row = r;
      return false;
    }
    total += host_losses[static_cast<size_t>(r)];
    counted += host_status[static_cast<size_t>(r)];
  }
  *loss_sum = total;
  *count = counted;
  return true;
}

template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* stats, const int64_t* targets, int64_t rows,
                            int64_t classes, int64_t ignore_index, T scale, Stream stream) {
  launch_rows("cross_entropy_backward_warp_rows", "cross_entropy_backward_block_rows",
              CrossEntropyBackwardRow<T>{dlogits, logits, stats, targets, classes, ignore_index, scale}, rows, classes,
              stream);
}

#define REMAT_INSTANTIATE_SOFTMAX(T)                                                                          \
  template void softmax_forward<T>(T*, const T*, int64_t, int64_t, int64_t, Stream);                          \
  template void softmax_backward<T>(T*, const T*, const T*, int64_t, int64_t, int64_t, Stream);               \
  template void log_softmax_forward<T>(T*, const T*, int64_t, int64_t, int64_t, Stream);                      \
  template void log_softmax_backward<T>(T*, const T*, const T*, int64_t, int64_t, int64_t, Stream);           \
  template bool cross_entropy_forward<T>(double*, int64_t*, T*, int64_t*, const T*, const int64_t*, int64_t, \
                                         int64_t, int64_t, Stream);                                           \
  template void cross_entropy_backward<T>(T*, const T*, const T*, const int64_t*, int64_t, int64_t, int64_t, T, \
                                         Stream);
REMAT_INSTANTIATE_SOFTMAX(float)
REMAT_INSTANTIATE_SOFTMAX(double)
#undef REMAT_INSTANTIATE_SOFTMAX

}  // namespace remat::kernels::cuda
