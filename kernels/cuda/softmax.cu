// Softmax, log_softmax and cross-entropy on the GPU; see softmax.h. One
// thread a row (outer x inner of them), walking its n elements in order:
// simple, deterministic, and fast enough for attention's rows; a warp per
// row is the later step.
#include "kernels/cuda/softmax.h"

#include <vector>

#include "kernels/cuda/launch.cuh"

namespace remat::kernels::cuda {
namespace {

__device__ inline float exp_of(float v) { return expf(v); }
__device__ inline double exp_of(double v) { return exp(v); }

template <class T>
__device__ inline T row_max(const T* x, int64_t n, int64_t s) {
  T m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i * s] > m ? x[i * s] : m;
  return m;
}

// Per row r of a (rows, classes) cross-entropy: -log_probs[r, t] (0 when
// ignored), and 1 for a counted row, 0 for an ignored one, -1 for a bad target.
template <class T>
__global__ void cross_entropy_rows(double* losses, int* status, const T* log_probs, const int64_t* targets,
                                   int64_t rows, int64_t classes, int64_t ignore_index) {
  REMAT_GRID_STRIDE(r, rows) {
    const int64_t t = targets[r];
    if (t == ignore_index) {
      losses[r] = 0;
      status[r] = 0;
    } else if (t < 0 || t >= classes) {
      losses[r] = 0;
      status[r] = -1;
    } else {
      losses[r] = -static_cast<double>(log_probs[r * classes + t]);
      status[r] = 1;
    }
  }
}

}  // namespace

template <class T> void softmax_forward(T* out, const T* x, int64_t outer, int64_t n, int64_t inner, Stream stream) {
  launch_elementwise(outer * inner, stream, [=] __device__(int64_t row) {
    const int64_t base = row / inner * n * inner + row % inner;
    const T m = row_max(x + base, n, inner);
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
  launch_elementwise(outer * inner, stream, [=] __device__(int64_t row) {
    const int64_t base = row / inner * n * inner + row % inner;
    T dot = 0;
    for (int64_t i = 0; i < n; ++i) dot += dout[base + i * inner] * out[base + i * inner];
    for (int64_t i = 0; i < n; ++i) dx[base + i * inner] = out[base + i * inner] * (dout[base + i * inner] - dot);
  });
}

template <class T> void log_softmax_forward(T* out, const T* x, int64_t outer, int64_t n, int64_t inner, Stream stream) {
  launch_elementwise(outer * inner, stream, [=] __device__(int64_t row) {
    const int64_t base = row / inner * n * inner + row % inner;
    const T m = row_max(x + base, n, inner);
    T total = 0;
    for (int64_t i = 0; i < n; ++i) total += exp_of(x[base + i * inner] - m);
    const T log_total = log(total);  // (x - m) - log(total), as on the CPU
    for (int64_t i = 0; i < n; ++i) out[base + i * inner] = (x[base + i * inner] - m) - log_total;
  });
}

template <class T>
void log_softmax_backward(T* dx, const T* dout, const T* out, int64_t outer, int64_t n, int64_t inner, Stream stream) {
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
bool cross_entropy_forward(double* loss_sum, int64_t* count, T* log_probs, int64_t* bad_row, const T* logits,
                           const int64_t* targets, int64_t rows, int64_t classes, int64_t ignore_index, Stream stream) {
  log_softmax_forward(log_probs, logits, rows, classes, 1, stream);
  *loss_sum = 0;
  *count = 0;
  if (rows == 0) return true;
  // Per-row losses and states, summed on the host in row order (as the CPU).
  auto* losses = static_cast<double*>(scratch_on(stream.device, Scratch::CrossEntropyLosses,
                                                 static_cast<size_t>(rows) * sizeof(double)));
  auto* status = static_cast<int*>(scratch_on(stream.device, Scratch::CrossEntropyStatus,
                                              static_cast<size_t>(rows) * sizeof(int)));
  launch("cross_entropy_rows", cross_entropy_rows<T>, {blocks_for(rows), kThreads}, stream, losses, status, log_probs,
         targets, rows, classes, ignore_index);
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
void cross_entropy_backward(T* dlogits, const T* log_probs, const int64_t* targets, int64_t rows, int64_t classes,
                            int64_t ignore_index, T scale, Stream stream) {
  launch_elementwise(rows * classes, stream, [=] __device__(int64_t e) {
    const int64_t r = e / classes, c = e % classes;
    const int64_t t = targets[r];
    dlogits[e] = t == ignore_index ? T(0) : scale * exp_of(log_probs[e]) - (c == t ? scale : T(0));
  });
}

#define REMAT_INSTANTIATE_SOFTMAX(T)                                                                          \
  template void softmax_forward<T>(T*, const T*, int64_t, int64_t, int64_t, Stream);                          \
  template void softmax_backward<T>(T*, const T*, const T*, int64_t, int64_t, int64_t, Stream);               \
  template void log_softmax_forward<T>(T*, const T*, int64_t, int64_t, int64_t, Stream);                      \
  template void log_softmax_backward<T>(T*, const T*, const T*, int64_t, int64_t, int64_t, Stream);           \
  template bool cross_entropy_forward<T>(double*, int64_t*, T*, int64_t*, const T*, const int64_t*, int64_t, \
                                         int64_t, int64_t, Stream);                                           \
  template void cross_entropy_backward<T>(T*, const T*, const int64_t*, int64_t, int64_t, int64_t, T, Stream);
REMAT_INSTANTIATE_SOFTMAX(float)
REMAT_INSTANTIATE_SOFTMAX(double)
#undef REMAT_INSTANTIATE_SOFTMAX

}  // namespace remat::kernels::cuda
