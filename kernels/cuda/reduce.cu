// squared_norm on the GPU; see reduce.h. kBlocks blocks each sum a strided
// share in double and reduce it in shared memory in a fixed tree; the host
// adds the kBlocks partials in order, so a run repeats bit for bit.
#include "kernels/cuda/reduce.h"

#include <mutex>
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

// kBlocks doubles on `device`, made once and kept: clipping calls this once
// per parameter, every step.
double* partials_on(int device) {
  static std::mutex mutex;
  static std::vector<double*> buffers;
  std::lock_guard lock(mutex);
  if (buffers.size() <= static_cast<size_t>(device)) buffers.resize(static_cast<size_t>(device) + 1, nullptr);
  double*& buffer = buffers[static_cast<size_t>(device)];
  if (!buffer) {
    buffer = static_cast<double*>(device_malloc(kBlocks * sizeof(double), device));
    if (!buffer) fail("squared_norm", "out of memory for its partial sums", __FILE__, __LINE__);
  }
  return buffer;
}

}  // namespace

template <class T>
double squared_norm(const T* x, int64_t n, Stream stream) {
  if (n == 0) return 0;
  double* partials = partials_on(stream.device);
  REMAT_CUDA_CHECK(cudaSetDevice(stream.device));
  squared_norm_partials<T><<<kBlocks, kThreads, 0, raw(stream)>>>(partials, x, n);
  REMAT_CUDA_LAUNCHED();
  double host[kBlocks];
  copy_device_to_host(host, partials, sizeof host, stream);
  double sum = 0;
  for (double partial : host) sum += partial;
  return sum;
}

template double squared_norm<float>(const float*, int64_t, Stream);
template double squared_norm<double>(const double*, int64_t, Stream);

}  // namespace remat::kernels::cuda
