// Column sums over few columns in two passes (reduce.cuh, Note [Column sums
// in chunks]): sum_to over leading axes and layer_norm_backward's dweight
// and dbias cut their rows into fixed chunks when the column tiles alone are
// too few, chunk sums then added in chunk order. The chunks follow from the
// shape alone; shapes of several chunks (odd rows, a last chunk shorter, a
// strided view) take two launches and match the CPU within float tolerance
// relative to the sum of the terms' magnitudes (float32 1e-5, float64
// 1e-12); a second run, and one with the emulated GPU's threads in a
// shuffled order, give the same bits (label cuda).
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/layer_norm.h"
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
using test::random_values;

using test::stream;

using test::bytes_of;

// |got - want| <= rtol * terms + atol, terms the sum of the magnitudes added.
template <class T>
void expect_sums_close(const std::vector<T>& got, const std::vector<T>& want, const std::vector<double>& terms,
                  const std::string& what) {
  const double rtol = sizeof(T) == 4 ? 1e-5 : 1e-12, atol = sizeof(T) == 4 ? 1e-6 : 1e-13;
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_LE(std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])), rtol * terms[i] + atol)
        << what << " at " << i << ": got " << got[i] << ", the CPU has " << want[i];
  }
}

// Runs `run` (which queues work on GPU 0's stream and reads its outputs back
// as bytes) three times: once, again, and (on the emulated GPU) with each
// block's threads in a shuffled order; all three give the same bits. Also
// counts the grids the first run launched (the emulated GPU's counter; 0
// on a real GPU, where the count is not checked).
struct Repeated {
  std::vector<std::vector<unsigned char>> bytes;
  uint64_t grids = 0;
};

Repeated repeated(const std::string& what, const std::function<std::vector<std::vector<unsigned char>>()>& run) {
  Repeated out;
#if REMAT_CUDA_EMULATION
  cuda_k::synchronize(stream());
  const uint64_t before = remat_emulation::counters().grids;
  out.bytes = run();
  out.grids = remat_emulation::counters().grids - before;
#else
  out.bytes = run();
#endif
  EXPECT_TRUE(run() == out.bytes) << what << ": a second run gave other bits";
#if REMAT_CUDA_EMULATION
  const auto shuffled = [&] {
    const test::ShuffledThreads order(0x5eed);
    return run();
  }();
  EXPECT_TRUE(shuffled == out.bytes) << what << ": threads in a shuffled order gave other bits";
#endif
  return out;
}

TEST(CudaColumnSums, ChunksFollowTheShapeAlone) {
  // W3's bias gradients and layer norms over 8192 rows: 768 columns are 96
  // tiles of 8, cut into 11 chunks (1056 blocks); 2304 and 3072 columns are
  // 288 and 384 tiles, cut into 4 and 3.
  EXPECT_EQ(cuda_k::column_sum_chunks(8192, 768), 11);
  EXPECT_EQ(cuda_k::column_sum_chunks(8192, 2304), 4);
  EXPECT_EQ(cuda_k::column_sum_chunks(8192, 3072), 3);
  // Each thread keeps at least 16 rows of a chunk (32 slices x 16 = 512 rows).
  EXPECT_EQ(cuda_k::column_sum_chunks(1023, 768), 1);
  EXPECT_EQ(cuda_k::column_sum_chunks(1024, 768), 2);
  // Enough tiles for the GPU already: one pass.
  EXPECT_EQ(cuda_k::column_sum_chunks(8192, 50304), 1);
  EXPECT_EQ(cuda_k::column_sum_chunks(0, 768), 1);
}

struct SumCase {
  std::vector<int64_t> shape, in_strides, out_strides;
  size_t in_elements;
  int64_t chunks;  // expected
};

template <class T>
void sum_to_in_chunks(const SumCase& c, uint64_t seed) {
  const int64_t rows = c.shape[0], n = c.shape[1];
  const std::string what = std::string(sizeof(T) == 4 ? "float32 " : "float64 ") + "sum_to (" + std::to_string(rows) +
                           ", " + std::to_string(n) + "), rows " + std::to_string(c.in_strides[0]) + " apart";
  ASSERT_EQ(cuda_k::column_sum_chunks(rows, n), c.chunks) << what;
  const std::vector<T> in = random_values<T>(c.in_elements, -1, 1, seed);
  std::vector<T> cpu(static_cast<size_t>(n)), magnitudes(in.size()), terms(static_cast<size_t>(n));
  cpu_k::sum_to<T>(cpu.data(), n, in.data(), c.in_strides, c.out_strides, c.shape);
  for (size_t i = 0; i < in.size(); ++i) magnitudes[i] = std::abs(in[i]);
  cpu_k::sum_to<T>(terms.data(), n, magnitudes.data(), c.in_strides, c.out_strides, c.shape);
  const DeviceBuffer<T> d_in(in);
  DeviceBuffer<T> d_out(cpu.size());
  const Repeated got = repeated(what, [&] {
    cuda_k::sum_to<T>(d_out.ptr, n, d_in.ptr, c.in_strides, c.out_strides, c.shape, stream());
    return std::vector<std::vector<unsigned char>>{bytes_of(d_out.read())};
  });
#if REMAT_CUDA_EMULATION
  EXPECT_EQ(got.grids, c.chunks > 1 ? 2u : 1u) << what << ": the launches of " << c.chunks << " chunks";
#endif
  std::vector<T> values(static_cast<size_t>(n));
  std::memcpy(values.data(), got.bytes[0].data(), got.bytes[0].size());
  expect_sums_close(values, cpu, std::vector<double>(terms.begin(), terms.end()), what);
}

TEST(CudaColumnSums, SumToInChunksMatchesTheCpuAndRepeats) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const SumCase cases[] = {
      {{4099, 200}, {200, 1}, {0, 1}, 4099 * 200, 8},   // 25 tiles; 8 chunks of 513 rows, the last 508
      {{2053, 37}, {37, 1}, {0, 1}, 2053 * 37, 4},      // 5 tiles, a partial one
      {{1500, 768}, {800, 1}, {0, 1}, 1500 * 800, 2},   // a view: rows 800 apart
      {{5000, 5}, {5, 1}, {0, 1}, 5000 * 5, 9},         // one tile of 5 columns
      {{300, 768}, {768, 1}, {0, 1}, 300 * 768, 1},     // too few rows to cut: one pass
  };
  uint64_t seed = 700;
  for (const SumCase& c : cases) {
    sum_to_in_chunks<float>(c, ++seed);
    sum_to_in_chunks<double>(c, ++seed);
  }
}

// layer_norm_backward's dweight and dbias (dx not asked for: the column
// sums' launches alone), with the CPU's statistics.
template <class T>
void layer_norm_sums_in_chunks(int64_t rows, int64_t channels, int64_t chunks, uint64_t seed) {
  const std::string what = std::string(sizeof(T) == 4 ? "float32 " : "float64 ") + "layer norm " +
                           std::to_string(rows) + " x " + std::to_string(channels);
  ASSERT_EQ(cuda_k::column_sum_chunks(rows, channels), chunks) << what;
  const size_t size = static_cast<size_t>(rows * channels), c = static_cast<size_t>(channels);
  const std::vector<T> x = random_values<T>(size, -3, 3, seed), dout = random_values<T>(size, -1, 1, seed + 1);
  const std::vector<T> weight = random_values<T>(c, 0.5, 1.5, seed + 2);
  std::vector<T> out(size), mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
  cpu_k::layer_norm_forward<T>(out.data(), mean.data(), rstd.data(), x.data(), weight.data(), nullptr, rows, channels,
                               1e-5);
  std::vector<T> dweight(c), dbias(c);
  cpu_k::layer_norm_backward<T>(nullptr, dweight.data(), dbias.data(), nullptr, dout.data(), x.data(), weight.data(),
                                mean.data(), rstd.data(), rows, channels, 1);
  std::vector<double> dweight_terms(c), dbias_terms(c);
  for (size_t r = 0; r < static_cast<size_t>(rows); ++r) {
    for (size_t j = 0; j < c; ++j) {
      const double dy = static_cast<double>(dout[r * c + j]);
      dweight_terms[j] += std::abs(dy * (static_cast<double>(x[r * c + j]) - mean[r]) * rstd[r]);
      dbias_terms[j] += std::abs(dy);
    }
  }
  const DeviceBuffer<T> d_x(x), d_dout(dout), d_weight(weight), d_mean(mean), d_rstd(rstd);
  DeviceBuffer<T> d_dw(c), d_db(c);
  const Repeated got = repeated(what, [&] {
    cuda_k::layer_norm_backward<T>(nullptr, d_dw.ptr, d_db.ptr, nullptr, d_dout.ptr, d_x.ptr, d_weight.ptr, d_mean.ptr,
                                   d_rstd.ptr, rows, channels, 1, stream());
    return std::vector<std::vector<unsigned char>>{bytes_of(d_dw.read()), bytes_of(d_db.read())};
  });
#if REMAT_CUDA_EMULATION
  EXPECT_EQ(got.grids, chunks > 1 ? 2u : 1u) << what << ": the launches of " << chunks << " chunks";
#endif
  std::vector<T> dw(c), db(c);
  std::memcpy(dw.data(), got.bytes[0].data(), got.bytes[0].size());
  std::memcpy(db.data(), got.bytes[1].data(), got.bytes[1].size());
  expect_sums_close(dw, dweight, dweight_terms, what + " dweight");
  expect_sums_close(db, dbias, dbias_terms, what + " dbias");
  // dbias alone (dweight null): the same bits.
  DeviceBuffer<T> d_db_alone(c);
  cuda_k::layer_norm_backward<T>(nullptr, nullptr, d_db_alone.ptr, nullptr, d_dout.ptr, d_x.ptr, d_weight.ptr,
                                 d_mean.ptr, d_rstd.ptr, rows, channels, 1, stream());
  EXPECT_TRUE(bytes_of(d_db_alone.read()) == got.bytes[1]) << what << ": dbias alone";
}

TEST(CudaColumnSums, LayerNormWeightAndBiasInChunksMatchTheCpuAndRepeat) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  layer_norm_sums_in_chunks<float>(2053, 96, 4, 800);  // 12 tiles of 8; chunks of 514 rows, the last 511
  layer_norm_sums_in_chunks<double>(2053, 96, 4, 810);
  layer_norm_sums_in_chunks<float>(1100, 77, 2, 820);  // a partial tile
  layer_norm_sums_in_chunks<double>(40, 77, 1, 830);   // one pass
}

}  // namespace
}  // namespace remat::kernels

#else

TEST(CudaColumnSums, NeedACudaBuild) { GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): CUDA kernels not built"; }

#endif
