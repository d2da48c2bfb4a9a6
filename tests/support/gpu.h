// Test support for the CUDA tests (CTest label cuda): skipping, with a
// message, where no GPU is present; GPU 0, its stream and the fused-epilogue
// flag; a buffer on GPU 0 filled from the host and read back; random values
// for the CPU and the GPU to share; results as bytes, their relative gap,
// dense strides; on the emulated GPU, shuffled threads for a scope. For a
// CUDA build only (REMAT_HAVE_CUDA).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "engine/device.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/runtime.h"
#if REMAT_CUDA_EMULATION
#include "kernels/cuda/emulation/control.h"
#endif

// REMAT_SKIP_WITHOUT_GPU("CUDA kernels") skips with "no GPU on this machine: CUDA kernels not run".
#define REMAT_SKIP_WITHOUT_GPU(what)                    \
  if (::remat::kernels::cuda::device_count() == 0)      \
  GTEST_SKIP() << "no GPU on this machine: " what " not run"

namespace remat::test {

inline const Device kGpu = Device::cuda(0);

// GPU 0's compute stream, where the tests' kernels and copies run.
inline kernels::cuda::Stream stream() { return kernels::cuda::compute_stream(0); }

// The fused GEMM epilogues on or off for a scope, and back off after it.
struct FusedEpilogues {
  explicit FusedEpilogues(bool on) { kernels::cuda::set_fused_epilogues(on); }
  ~FusedEpilogues() { kernels::cuda::set_fused_epilogues(false); }
  FusedEpilogues(const FusedEpilogues&) = delete;
  FusedEpilogues& operator=(const FusedEpilogues&) = delete;
};

// A buffer on GPU 0 holding `values` (or `count` zeros), freed at scope
// exit; its copies run on GPU 0's compute stream.
template <class T>
struct DeviceBuffer {
  explicit DeviceBuffer(const std::vector<T>& values) : n(values.size()) {
    ptr = static_cast<T*>(kernels::cuda::device_malloc(std::max<size_t>(n, 1) * sizeof(T), 0));
    if (n) kernels::cuda::copy_host_to_device(ptr, values.data(), n * sizeof(T), stream());
  }
  explicit DeviceBuffer(size_t count) : DeviceBuffer(std::vector<T>(count)) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { kernels::cuda::device_free(ptr, 0); }
  std::vector<T> read() const {
    std::vector<T> out(n);
    if (n) kernels::cuda::copy_device_to_host(out.data(), ptr, n * sizeof(T), stream());
    return out;
  }
  static kernels::cuda::Stream stream() { return test::stream(); }
  size_t n;
  T* ptr = nullptr;
};

// n values drawn uniformly from [low, high), the same for a seed everywhere.
template <class T>
std::vector<T> random_values(size_t n, double low, double high, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> draw(low, high);
  std::vector<T> out(n);
  for (T& v : out) v = static_cast<T>(draw(rng));
  return out;
}

// The bytes of `values`: results compared bit for bit.
template <class T>
std::vector<unsigned char> bytes_of(const std::vector<T>& values) {
  std::vector<unsigned char> out(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// max |x - y| over max |y| (max |x - y| where y is all zeros).
template <class T>
double relative_gap(const std::vector<T>& x, const std::vector<T>& y) {
  double gap = 0, scale = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    gap = std::max(gap, std::abs(static_cast<double>(x[i]) - static_cast<double>(y[i])));
    scale = std::max(scale, std::abs(static_cast<double>(y[i])));
  }
  return scale == 0 ? gap : gap / scale;
}

// The strides of a dense (row-major) array of `shape`, and its element count.
inline std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}
inline int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// n values drawn uniformly from [-1, 1).
template <class T>
std::vector<T> random_values(size_t n, uint64_t seed) {
  return random_values<T>(n, -1, 1, seed);
}

#if REMAT_CUDA_EMULATION
// The emulated GPU starts and resumes each block's threads in a random
// order while this lives; the order before it after (its seed, where it was
// shuffled too, is not kept).
struct ShuffledThreads {
  explicit ShuffledThreads(uint64_t seed) : before(remat_emulation::thread_order()) {
    remat_emulation::set_thread_order(remat_emulation::ThreadOrder::Shuffled, seed);
  }
  ~ShuffledThreads() { remat_emulation::set_thread_order(before); }
  ShuffledThreads(const ShuffledThreads&) = delete;
  ShuffledThreads& operator=(const ShuffledThreads&) = delete;
  remat_emulation::ThreadOrder before;
};
#endif

}  // namespace remat::test
