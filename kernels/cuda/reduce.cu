// Reductions on the GPU; see reduce.h. sum_to and max: one thread an output
// element, walking its inputs in order. squared_norm: kBlocks blocks each
// sum a strided share in double and reduce it in shared memory in a fixed
// tree; the host adds the kBlocks partials in order.
#include "kernels/cuda/reduce.h"

#include <vector>

#include "kernels/cuda/launch.cuh"

namespace remat::kernels::cuda {
namespace {

constexpr int kBlocks = 256;

template <class T>
__global__ void squared_norm_partials(double* partials, const T* x, int64_t n) {
  __shared__ double share[kThreads];
  double acc = 0;
  REMAT_GRID_STRIDE(i, n) acc += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  share[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) share[threadIdx.x] += share[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = share[0];
}

}  // namespace

template <class T>
void sum_to(T* out, int64_t out_numel, const T* in, const std::vector<int64_t>& in_strides,
            const std::vector<int64_t>& out_strides, const std::vector<int64_t>& shape, Stream stream) {
  // Kept axes (out_strides != 0) first, then the reduced ones: thread o
  // walks every reduced index r in order and adds in[o, r].
  std::vector<int64_t> order_shape, kept_in, reduced_shape, reduced_in;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (out_strides[d] != 0) {
      order_shape.push_back(shape[d]);
      kept_in.push_back(in_strides[d]);
    } else {
      reduced_shape.push_back(shape[d]);
      reduced_in.push_back(in_strides[d]);
    }
  }
  const StridedArgs<1> kept = strided_args<1>(order_shape, {&kept_in});
  const StridedArgs<1> reduced = strided_args<1>(reduced_shape, {&reduced_in});
  const int64_t reduced_count = numel_of(reduced_shape);
  launch_elementwise(out_numel, stream, [=] __device__(int64_t o) {
    const int64_t base = offsets_of(kept, o).at[0];
    T acc = T(0);
    for (int64_t r = 0; r < reduced_count; ++r) acc += in[base + offsets_of(reduced, r).at[0]];
    out[o] = acc;
  });
}

template <class T>
void max_along(T* values, int64_t* indices, const T* x, int64_t outer, int64_t n, int64_t inner, Stream stream) {
  launch_elementwise(outer * inner, stream, [=] __device__(int64_t k) {
    const int64_t o = k / inner, j = k % inner;
    const T* row = x + o * n * inner + j;
    T best = row[0];
    int64_t best_index = 0;
    for (int64_t i = 1; i < n && !isnan(best); ++i) {
      const T v = row[i * inner];
      if (v > best || isnan(v)) {
        best = v;
        best_index = i;
      }
    }
    if (values) values[k] = best;
    if (indices) indices[k] = best_index;
  });
}

template <class T>
void max_along_backward(T* dx, const int64_t* indices, const T* dout, int64_t outer, int64_t n, int64_t inner,
                        Stream stream) {
  launch_elementwise(outer * n * inner, stream, [=] __device__(int64_t e) {
    const int64_t j = e % inner, i = e / inner % n, o = e / (inner * n);
    dx[e] = indices[o * inner + j] == i ? dout[o * inner + j] : T(0);
  });
}

template <class T>
double squared_norm(const T* x, int64_t n, Stream stream) {
  if (n == 0) return 0;
  // Kept scratch (launch.cuh): clipping calls this once per parameter, every step.
  auto* partials =
      static_cast<double*>(scratch_on(stream.device, Scratch::SquaredNormPartials, kBlocks * sizeof(double)));
  launch("squared_norm_partials", squared_norm_partials<T>, {kBlocks, kThreads}, stream, partials, x, n);
  double host[kBlocks];
  copy_device_to_host(host, partials, sizeof host, stream);
  double sum = 0;
  for (double partial : host) sum += partial;
  return sum;
}

#define REMAT_INSTANTIATE_REDUCE(T)                                                                          \
  template void sum_to<T>(T*, int64_t, const T*, const std::vector<int64_t>&, const std::vector<int64_t>&,   \
                          const std::vector<int64_t>&, Stream);                                              \
  template void max_along<T>(T*, int64_t*, const T*, int64_t, int64_t, int64_t, Stream);                     \
  template void max_along_backward<T>(T*, const int64_t*, const T*, int64_t, int64_t, int64_t, Stream);      \
  template double squared_norm<T>(const T*, int64_t, Stream);
REMAT_INSTANTIATE_REDUCE(float)
REMAT_INSTANTIATE_REDUCE(double)
#undef REMAT_INSTANTIATE_REDUCE

}  // namespace remat::kernels::cuda
