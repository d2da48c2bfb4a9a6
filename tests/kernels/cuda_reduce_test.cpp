// reduce.cu's full sums and warp-per-output sums against their CPU twins
// (label cuda): sum_to of a whole tensor to one value on sizes that cross the
// split into fixed chunks (1, 255, one chunk, 256 * 4096 + 17, 10^7), on a
// strided view, with a NaN or an infinity anywhere; sum_to over trailing
// axes (a warp an output) with 31, 32, 1000 inputs an output. float32 within
// 1e-5 of the sum of the terms' magnitudes, float64 within 1e-12; a second
// run, and a run with the emulated GPU's threads in a shuffled order, give
// the same bits. max_along over inner axes: the CPU's values and indices,
// ties and NaNs included. squared_norm: the same bits every run.
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/reduce.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/runtime.h"
#include "tests/support/gpu.h"

#if REMAT_CUDA_EMULATION
#include "kernels/cuda/emulation/control.h"
#endif

namespace remat::kernels {
namespace {

namespace cpu_k = kernels::cpu;
namespace cuda_k = kernels::cuda;
using test::DeviceBuffer;

using test::stream;

using test::random_values;

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

struct ReduceCase {
  std::string what;
  std::vector<int64_t> shape, in_strides, out_strides;
  size_t in_elements;
};

ReduceCase contiguous_to_one(int64_t n) { return {"(" + std::to_string(n) + ") -> ()", {n}, {1}, {0}, static_cast<size_t>(n)}; }

// The CUDA sum_to of `in`, run three times (again; with shuffled threads on
// the emulated GPU), each giving the same bits.
template <class T>
std::vector<T> cuda_sum_to(const ReduceCase& c, const std::vector<T>& in, int64_t out_numel) {
  const DeviceBuffer<T> d_in(in);
  const DeviceBuffer<T> d_out(std::vector<T>(static_cast<size_t>(out_numel)));
  auto run = [&] {
    cuda_k::sum_to<T>(d_out.ptr, out_numel, d_in.ptr, c.in_strides, c.out_strides, c.shape, stream());
    return d_out.read();
  };
  const std::vector<T> first = run();
  EXPECT_TRUE(same_bits(run(), first)) << c.what << ": a second run gave other bits";
#if REMAT_CUDA_EMULATION
  const std::vector<T> shuffled = [&] {
    const test::ShuffledThreads order(0x5eed);
    return run();
  }();
  EXPECT_TRUE(same_bits(shuffled, first)) << c.what << ": the shuffled thread order gave other bits";
#endif
  return first;
}

template <class T>
void parity(const ReduceCase& c, uint64_t seed) {
  const std::string where = std::string(sizeof(T) == 4 ? "float32 " : "float64 ") + c.what;
  int64_t out_numel = 1;
  for (size_t d = 0; d < c.shape.size(); ++d) out_numel *= c.out_strides[d] != 0 ? c.shape[d] : 1;
  const std::vector<T> in = random_values<T>(c.in_elements, seed);
  std::vector<T> cpu(static_cast<size_t>(out_numel)), terms(cpu.size()), magnitudes(in.size());
  cpu_k::sum_to<T>(cpu.data(), out_numel, in.data(), c.in_strides, c.out_strides, c.shape);
  for (size_t i = 0; i < in.size(); ++i) magnitudes[i] = std::abs(in[i]);
  cpu_k::sum_to<T>(terms.data(), out_numel, magnitudes.data(), c.in_strides, c.out_strides, c.shape);
  const std::vector<T> cuda = cuda_sum_to<T>(c, in, out_numel);
  const double relative = sizeof(T) == 4 ? 1e-5 : 1e-12, absolute = sizeof(T) == 4 ? 1e-6 : 1e-13;
  ASSERT_EQ(cuda.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double a = static_cast<double>(cuda[i]), b = static_cast<double>(cpu[i]);
    ASSERT_LE(std::abs(a - b), relative * static_cast<double>(terms[i]) + absolute)
        << where << " at " << i << ": " << a << " vs " << b;
  }
}

TEST(CudaReduce, FullSumMatchesTheCpuAndRepeats) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  uint64_t seed = 900;
  for (int64_t n : {int64_t{1}, int64_t{255}, int64_t{2048}, int64_t{2049}, int64_t{256} * 4096 + 17,
                    int64_t{10000000}}) {
    parity<float>(contiguous_to_one(n), ++seed);
    if (n < 10000000) parity<double>(contiguous_to_one(n), ++seed);
  }
  // Views: a transposed matrix, and every other element of a row.
  parity<float>({"(300, 700) transposed -> ()", {700, 300}, {1, 700}, {0, 0}, 300 * 700}, ++seed);
  parity<double>({"(5000) of every other element -> ()", {5000}, {2}, {0}, 10000}, ++seed);
  parity<float>({"(3, 1, 40000) -> (1, 1, 1)", {3, 1, 40000}, {40000, 40000, 1}, {0, 0, 0}, 120000}, ++seed);
}

TEST(CudaReduce, FullSumCarriesNanAndInfinity) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const int64_t n = 256 * 4096 + 17;
  const ReduceCase c = contiguous_to_one(n);
  for (size_t at : {size_t{0}, size_t{4095}, static_cast<size_t>(n / 2), static_cast<size_t>(n - 1)}) {
    std::vector<float> in = random_values<float>(static_cast<size_t>(n), at);
    in[at] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(std::isnan(cuda_sum_to<float>(c, in, 1)[0])) << "NaN at " << at;
    in[at] = std::numeric_limits<float>::infinity();
    EXPECT_EQ(cuda_sum_to<float>(c, in, 1)[0], std::numeric_limits<float>::infinity()) << "infinity at " << at;
    in[at / 2] = -std::numeric_limits<float>::infinity();
    if (at / 2 != at) {
      EXPECT_TRUE(std::isnan(cuda_sum_to<float>(c, in, 1)[0])) << "inf - inf, at " << at;
    }
  }
}

TEST(CudaReduce, TrailingAxesMatchTheCpuAndRepeat) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const ReduceCase cases[] = {
      // A warp an output: 32 or more inputs each.
      {"(100, 32) -> (100, 1)", {100, 32}, {32, 1}, {1, 0}, 100 * 32},
      {"(70, 1000) -> (70, 1)", {70, 1000}, {1000, 1}, {1, 0}, 70 * 1000},
      {"(4, 50, 6) -> (4, 1, 6)", {4, 50, 6}, {300, 6, 1}, {6, 0, 1}, 4 * 50 * 6},
      {"(3, 4, 5, 6) -> (1, 4, 1, 1)", {3, 4, 5, 6}, {120, 30, 6, 1}, {0, 1, 0, 0}, 3 * 4 * 5 * 6},
      {"(40, 3000) -> (3000)", {40, 3000}, {3000, 1}, {0, 1}, 3000 * 40},  // column sums
      {"(40, 3000) transposed -> (40)", {3000, 40}, {1, 3000}, {0, 1}, 3000 * 40},
      // A thread an output: fewer than 32.
      {"(100, 31) -> (100, 1)", {100, 31}, {31, 1}, {1, 0}, 100 * 31},
  };
  uint64_t seed = 700;
  for (const ReduceCase& c : cases) {
    parity<float>(c, ++seed);
    parity<double>(c, ++seed);
  }
}

// max_along with inner > 1 (a block per tile of outputs): the CPU's values
// (bits: a NaN's, a zero's sign) and indices, with ties and NaNs anywhere,
// the same bits every run and in a shuffled thread order.
template <class T>
void max_along_parity(int64_t outer, int64_t n, int64_t inner, uint64_t seed) {
  const std::string what = "(" + std::to_string(outer) + ", " + std::to_string(n) + ", " + std::to_string(inner) + ")";
  const auto size = static_cast<size_t>(outer * n * inner), out = static_cast<size_t>(outer * inner);
  const T choices[] = {T(-1), T(-0.0), T(0), T(1), T(2)};
  std::mt19937_64 rng(seed);
  std::vector<T> x(size);
  for (T& v : x) v = choices[rng() % 5];
  for (size_t k = 0; k < out / 3; ++k) x[rng() % size] = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> cpu_values(out);
  std::vector<int64_t> cpu_indices(out);
  cpu_k::max_along<T>(cpu_values.data(), cpu_indices.data(), x.data(), outer, n, inner);
  const DeviceBuffer<T> d_x(x);
  const DeviceBuffer<T> d_values{std::vector<T>(out)};
  const DeviceBuffer<int64_t> d_indices{std::vector<int64_t>(out)};
  auto run = [&] {
    cuda_k::max_along<T>(d_values.ptr, d_indices.ptr, d_x.ptr, outer, n, inner, stream());
    return std::make_pair(d_values.read(), d_indices.read());
  };
  const auto first = run();
  EXPECT_TRUE(same_bits(first.first, cpu_values)) << "values " << what;
  EXPECT_EQ(first.second, cpu_indices) << "indices " << what;
  const auto again = run();
  EXPECT_TRUE(same_bits(again.first, first.first) && again.second == first.second) << what;
#if REMAT_CUDA_EMULATION
  const auto shuffled = [&] {
    const test::ShuffledThreads order(seed);
    return run();
  }();
  EXPECT_TRUE(same_bits(shuffled.first, first.first) && shuffled.second == first.second) << "shuffled " << what;
#endif
}

TEST(CudaReduce, MaxAlongInnerAxesMatchesTheCpu) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const int64_t shapes[][3] = {{7, 33, 5},  {2, 20000, 3}, {1, 5000, 40}, {3, 2, 1000},
                               {1, 1, 17},  {5, 300, 16},  {4, 1, 2},     {1, 100000, 2}};
  uint64_t seed = 40;
  for (const auto& s : shapes) {
    max_along_parity<float>(s[0], s[1], s[2], ++seed);
    max_along_parity<double>(s[0], s[1], s[2], ++seed);
  }
}

TEST(CudaReduce, SquaredNormRepeatsAndMatchesTheCpu) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  for (int64_t n : {int64_t{1}, int64_t{255}, int64_t{256} * 4096 + 17}) {
    const std::vector<float> x = random_values<float>(static_cast<size_t>(n), static_cast<uint64_t>(n));
    const DeviceBuffer<float> d_x(x);
    const double cuda = cuda_k::squared_norm<float>(d_x.ptr, n, stream());
    EXPECT_EQ(cuda_k::squared_norm<float>(d_x.ptr, n, stream()), cuda);
    EXPECT_NEAR(cuda, cpu_k::squared_norm<float>(x.data(), n), 1e-12 * cuda) << n;
  }
}

}  // namespace
}  // namespace remat::kernels

#endif  // REMAT_HAVE_CUDA
