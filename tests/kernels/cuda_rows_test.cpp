// The row and column kernels of kernels/cuda (softmax.cu: a warp or a block
// per row; layer_norm.cu: a warp per row, column sums for dweight and
// dbias; reduce.cu: sum_to's column sums, max_along's warp per row) against
// their CPU twins (label cuda), on shapes that cross every boundary of their
// split: rows that do not fill the last block, rows that are not a multiple
// of 32 long, rows of 1 and of fewer than 32 elements, rows long enough for
// a block each (n >= 1024), inner > 1, more rows than the grid has warps.
// float32 within |a - b| <= 1e-5 |b| + 1e-6, float64 within 1e-12 |b| +
// 1e-13 (for a sum over rows, the sum of its terms' magnitudes in place of
// |b|); a second run gives the same bits, and so does a run of the emulated
// GPU with its threads in a shuffled order (a missing barrier would give
// other sums).
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/softmax.h"
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

// |cuda - cpu| <= relative * scale + absolute, scale |cpu| unless given: for
// a sum over many rows, the sum of its terms' magnitudes (two orders of
// float additions differ by a part of that, however much the terms cancel).
template <class T>
void expect_rows_close(const std::vector<T>& cuda, const std::vector<T>& cpu, const std::string& what,
                  const std::vector<double>& scale = {}) {
  const double relative = sizeof(T) == 4 ? 1e-5 : 1e-12, absolute = sizeof(T) == 4 ? 1e-6 : 1e-13;
  ASSERT_EQ(cuda.size(), cpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double a = static_cast<double>(cuda[i]), b = static_cast<double>(cpu[i]);
    const double bound = relative * (scale.empty() ? std::abs(b) : scale[i]) + absolute;
    ASSERT_LE(std::abs(a - b), bound) << what << " at " << i << ": " << a << " vs " << b;
  }
}

// The outputs of one run, as bytes: compared bit for bit across runs.
using Bytes = std::vector<unsigned char>;
using test::bytes_of;
template <class T>
std::vector<T> values_of(const Bytes& b) {
  std::vector<T> out(b.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), b.data(), b.size());
  return out;
}

#if REMAT_CUDA_EMULATION
using test::ShuffledThreads;
#endif

// run() (the CUDA kernels, their outputs as Bytes) three times: the result,
// then again, then (on the emulated GPU) with shuffled threads; each must
// give the first run's bits.
template <class Run>
std::vector<Bytes> repeatable(const std::string& what, Run run) {
  const std::vector<Bytes> first = run();
  EXPECT_TRUE(run() == first) << what << ": a second run gave other bits";
#if REMAT_CUDA_EMULATION
  {
    const ShuffledThreads shuffled(0x5eed + first.size());
    EXPECT_TRUE(run() == first) << what << ": the shuffled thread order gave other bits";
  }
#endif
  return first;
}

struct RowShape {
  int64_t outer, n, inner;
};

std::string name_of(const RowShape& s, size_t bytes) {
  return (bytes == 4 ? "float32 (" : "float64 (") + std::to_string(s.outer) + ", " + std::to_string(s.n) + ", " +
         std::to_string(s.inner) + ")";
}

template <class T>
void softmax_family_parity(const RowShape& s, uint64_t seed) {
  const size_t size = static_cast<size_t>(s.outer * s.n * s.inner);
  const std::string where = name_of(s, sizeof(T));
  // Rows shifted by 0, 30 and 60 (the max is taken off before exp).
  std::vector<T> x = random_values<T>(size, -4, 4, seed);
  for (size_t e = 0; e < size; ++e) x[e] += static_cast<T>(30 * (e / static_cast<size_t>(s.n * s.inner) % 3));
  const std::vector<T> dout = random_values<T>(size, -1, 1, seed + 1);
  std::vector<T> soft(size), log_soft(size), dsoft(size), dlog(size);
  cpu_k::softmax_forward<T>(soft.data(), x.data(), s.outer, s.n, s.inner);
  cpu_k::log_softmax_forward<T>(log_soft.data(), x.data(), s.outer, s.n, s.inner);
  cpu_k::softmax_backward<T>(dsoft.data(), dout.data(), soft.data(), s.outer, s.n, s.inner);
  cpu_k::log_softmax_backward<T>(dlog.data(), dout.data(), log_soft.data(), s.outer, s.n, s.inner);

  // Backward kernels read the CPU's forward outputs: each kernel alone.
  const DeviceBuffer<T> d_x(x), d_dout(dout), d_soft(soft), d_log_soft(log_soft);
  DeviceBuffer<T> d_out(size), d_log_out(size), d_dsoft(size), d_dlog(size);
  const std::vector<Bytes> got = repeatable(where, [&] {
    cuda_k::softmax_forward<T>(d_out.ptr, d_x.ptr, s.outer, s.n, s.inner, stream());
    cuda_k::log_softmax_forward<T>(d_log_out.ptr, d_x.ptr, s.outer, s.n, s.inner, stream());
    cuda_k::softmax_backward<T>(d_dsoft.ptr, d_dout.ptr, d_soft.ptr, s.outer, s.n, s.inner, stream());
    cuda_k::log_softmax_backward<T>(d_dlog.ptr, d_dout.ptr, d_log_soft.ptr, s.outer, s.n, s.inner, stream());
    return std::vector<Bytes>{bytes_of(d_out.read()), bytes_of(d_log_out.read()), bytes_of(d_dsoft.read()),
                              bytes_of(d_dlog.read())};
  });
  expect_rows_close(values_of<T>(got[0]), soft, "softmax_forward " + where);
  expect_rows_close(values_of<T>(got[1]), log_soft, "log_softmax_forward " + where);
  expect_rows_close(values_of<T>(got[2]), dsoft, "softmax_backward " + where);
  expect_rows_close(values_of<T>(got[3]), dlog, "log_softmax_backward " + where);
}

// Warp per row: n = 1, n < 32, n not a multiple of 32, the longest warp
// row; rows not a multiple of the 8 a block takes, many blocks. Block per
// row: n = 1024 exactly and a longer n that no block size divides. And the
// one-thread-a-row path for inner > 1.
const RowShape kSoftmaxShapes[] = {{1001, 1, 1}, {1003, 17, 1}, {517, 100, 1}, {21, 1023, 1},
                                   {5, 1024, 1},  {19, 1500, 1}, {7, 33, 5}};

TEST(CudaRows, SoftmaxFamilyMatchesTheCpuAndRepeats) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  uint64_t seed = 1;
  for (const RowShape& s : kSoftmaxShapes) {
    softmax_family_parity<float>(s, seed += 2);
    softmax_family_parity<double>(s, seed += 2);
  }
}

// More rows than the grid has warps (4096 blocks of 8) or blocks (4096):
// the grid-stride loops, where a block's shared memory serves row after row.
void grid_stride_parity(const RowShape& s) {
  const size_t size = static_cast<size_t>(s.outer * s.n);
  const std::vector<float> x = random_values<float>(size, -4, 4, 99);
  std::vector<float> cpu(size);
  cpu_k::log_softmax_forward<float>(cpu.data(), x.data(), s.outer, s.n, s.inner);
  const DeviceBuffer<float> d_x(x);
  DeviceBuffer<float> d_out(size);
  const auto run = [&] {
    cuda_k::log_softmax_forward<float>(d_out.ptr, d_x.ptr, s.outer, s.n, s.inner, stream());
    return d_out.read();
  };
  const std::vector<float> got = run();
  expect_rows_close(got, cpu, "log_softmax_forward " + name_of(s, 4));
#if REMAT_CUDA_EMULATION
  const ShuffledThreads shuffled(7);
  EXPECT_TRUE(bytes_of(run()) == bytes_of(got)) << name_of(s, 4) << ": the shuffled thread order gave other bits";
#endif
}

TEST(CudaRows, SoftmaxCoversMoreRowsThanTheGridHasWarps) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  grid_stride_parity({4096 * 8 + 77, 3, 1});
}

TEST(CudaRows, SoftmaxCoversMoreRowsThanTheGridHasBlocks) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  grid_stride_parity({4096 + 5, 1024, 1});
}

// Forward (statistics, loss, count) and backward against the CPU, the
// backward from the CPU's statistics (each kernel alone) into a new buffer
// and over a copy of the logits (the op's in-place case: the same bits);
// every run repeats bit for bit.
template <class T>
void cross_entropy_parity(int64_t rows, int64_t classes, uint64_t seed) {
  const std::string where = (sizeof(T) == 4 ? "float32 " : "float64 ") + std::to_string(rows) + " x " +
                            std::to_string(classes);
  const std::vector<T> logits = random_values<T>(static_cast<size_t>(rows * classes), -6, 6, seed);
  std::mt19937_64 rng(seed + 1);
  std::vector<int64_t> targets(static_cast<size_t>(rows));
  for (int64_t& t : targets) t = rng() % 7 == 0 ? -100 : static_cast<int64_t>(rng() % static_cast<uint64_t>(classes));
  std::vector<T> cpu_stats(static_cast<size_t>(rows * 2)), cpu_dlogits(logits.size());
  double cpu_loss = 0;
  int64_t cpu_count = 0, bad = -1;
  ASSERT_TRUE(cpu_k::cross_entropy_forward<T>(&cpu_loss, &cpu_count, cpu_stats.data(), &bad, logits.data(),
                                              targets.data(), rows, classes, -100));
  const T scale = T(0.75) / static_cast<T>(std::max<int64_t>(cpu_count, 1));
  cpu_k::cross_entropy_backward<T>(cpu_dlogits.data(), logits.data(), cpu_stats.data(), targets.data(), rows, classes,
                                   -100, scale);
  const DeviceBuffer<T> d_logits(logits), d_cpu_stats(cpu_stats);
  const DeviceBuffer<int64_t> d_targets(targets);
  DeviceBuffer<T> d_stats(cpu_stats.size()), d_dlogits(logits.size()), d_in_place(logits);
  double loss = 0;
  int64_t count = 0;
  const std::vector<Bytes> got = repeatable(where, [&] {
    EXPECT_TRUE(cuda_k::cross_entropy_forward<T>(&loss, &count, d_stats.ptr, &bad, d_logits.ptr, d_targets.ptr,
                                                 rows, classes, -100, stream()));
    cuda_k::cross_entropy_backward<T>(d_dlogits.ptr, d_logits.ptr, d_cpu_stats.ptr, d_targets.ptr, rows, classes, -100,
                                      scale, stream());
    cuda_k::copy_device_to_device(d_in_place.ptr, d_logits.ptr, logits.size() * sizeof(T), stream());
    cuda_k::cross_entropy_backward<T>(d_in_place.ptr, d_in_place.ptr, d_cpu_stats.ptr, d_targets.ptr, rows, classes,
                                      -100, scale, stream());
    return std::vector<Bytes>{bytes_of(d_stats.read()), bytes_of(std::vector<double>{loss}),
                              bytes_of(std::vector<int64_t>{count}), bytes_of(d_dlogits.read()),
                              bytes_of(d_in_place.read())};
  });
  expect_rows_close(values_of<T>(got[0]), cpu_stats, "cross_entropy stats " + where);
  EXPECT_NEAR(values_of<double>(got[1])[0], cpu_loss, (sizeof(T) == 4 ? 1e-5 : 1e-12) * std::abs(cpu_loss)) << where;
  EXPECT_EQ(values_of<int64_t>(got[2])[0], cpu_count) << where;
  // |dlogits| <= scale: a softmax's terms, within the tolerance of scale.
  expect_rows_close(values_of<T>(got[3]), cpu_dlogits, "cross_entropy_backward " + where,
               std::vector<double>(cpu_dlogits.size(), static_cast<double>(scale)));
  EXPECT_TRUE(got[4] == got[3]) << where << ": in place over the logits gave other bits";

  // A target out of range: false, naming the first bad row, as the CPU.
  targets[static_cast<size_t>(rows / 2)] = classes;
  targets[static_cast<size_t>(rows - 1)] = -3;
  const DeviceBuffer<int64_t> d_bad_targets(targets);
  int64_t cuda_bad = -1;
  EXPECT_FALSE(cuda_k::cross_entropy_forward<T>(&loss, &count, d_stats.ptr, &cuda_bad, d_logits.ptr,
                                                d_bad_targets.ptr, rows, classes, -100, stream()));
  EXPECT_EQ(cuda_bad, rows / 2) << where;
}

TEST(CudaRows, CrossEntropyMatchesTheCpuAndRepeats) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  cross_entropy_parity<float>(301, 250, 21);   // a warp a row
  cross_entropy_parity<float>(29, 1500, 23);   // a block a row
  cross_entropy_parity<float>(11, 1024, 29);   // the first block row
  cross_entropy_parity<float>(13, 1023, 31);   // the longest warp row
  cross_entropy_parity<float>(19, 5, 33);      // fewer classes than lanes
  cross_entropy_parity<double>(301, 250, 25);
  cross_entropy_parity<double>(29, 1500, 27);
}

struct NormShape {
  int64_t rows, channels;
  bool weight, bias;
  double offset;  // added to every x: the two-pass statistics
};

template <class T>
void layer_norm_parity(const NormShape& s, uint64_t seed) {
  const size_t size = static_cast<size_t>(s.rows * s.channels), c = static_cast<size_t>(s.channels);
  const std::string where = std::string(sizeof(T) == 4 ? "float32 " : "float64 ") + std::to_string(s.rows) + " x " +
                            std::to_string(s.channels) + (s.weight ? " weight" : "") + (s.bias ? " bias" : "");
  std::vector<T> x = random_values<T>(size, -3, 3, seed);
  for (T& v : x) v += static_cast<T>(s.offset);
  const std::vector<T> weight = random_values<T>(c, 0.5, 1.5, seed + 1), bias = random_values<T>(c, -1, 1, seed + 2);
  const std::vector<T> dout = random_values<T>(size, -1, 1, seed + 3);
  const T* w = s.weight ? weight.data() : nullptr;
  const T* b = s.bias ? bias.data() : nullptr;
  std::vector<T> out(size), mean(static_cast<size_t>(s.rows)), rstd(static_cast<size_t>(s.rows));
  cpu_k::layer_norm_forward<T>(out.data(), mean.data(), rstd.data(), x.data(), w, b, s.rows, s.channels, 1e-5);
  std::vector<T> dx(size), dweight(c), dbias(c);
  cpu_k::layer_norm_backward<T>(dx.data(), dweight.data(), dbias.data(), nullptr, dout.data(), x.data(), w,
                                mean.data(), rstd.data(), s.rows, s.channels, 1);

  // The backward reads the CPU's statistics: each kernel alone.
  const DeviceBuffer<T> d_x(x), d_weight(weight), d_bias(bias), d_dout(dout), d_mean(mean), d_rstd(rstd);
  DeviceBuffer<T> d_out(size), d_m(mean.size()), d_r(rstd.size()), d_dx(size), d_dw(c), d_db(c);
  const T* dw_in = s.weight ? d_weight.ptr : nullptr;
  const T* db_in = s.bias ? d_bias.ptr : nullptr;
  const std::vector<Bytes> got = repeatable(where, [&] {
    cuda_k::layer_norm_forward<T>(d_out.ptr, d_m.ptr, d_r.ptr, d_x.ptr, dw_in, db_in, s.rows, s.channels, 1e-5,
                                  stream());
    cuda_k::layer_norm_backward<T>(d_dx.ptr, d_dw.ptr, d_db.ptr, nullptr, d_dout.ptr, d_x.ptr, dw_in, d_mean.ptr,
                                   d_rstd.ptr, s.rows, s.channels, 1, stream());
    return std::vector<Bytes>{bytes_of(d_out.read()), bytes_of(d_m.read()), bytes_of(d_r.read()),
                              bytes_of(d_dx.read()), bytes_of(d_dw.read()), bytes_of(d_db.read())};
  });
  expect_rows_close(values_of<T>(got[0]), out, "layer_norm_forward out " + where);
  expect_rows_close(values_of<T>(got[1]), mean, "layer_norm_forward mean " + where);
  expect_rows_close(values_of<T>(got[2]), rstd, "layer_norm_forward rstd " + where);
  // dx = rstd (g - mean(g) - xhat mean(g xhat)), a difference of terms as
  // large as rstd g (1 / sqrt(eps) g for one channel, where it is 0): held
  // to the size of its terms. dweight and dbias, sums over rows, likewise.
  std::vector<double> dx_terms(size), dweight_terms(c), dbias_terms(c);
  for (size_t r = 0; r < static_cast<size_t>(s.rows); ++r) {
    double mean_g = 0, mean_gx = 0;
    for (size_t j = 0; j < c; ++j) {
      const double g = static_cast<double>(dout[r * c + j]) * (w ? static_cast<double>(w[j]) : 1.0);
      const double xhat = (static_cast<double>(x[r * c + j]) - mean[r]) * rstd[r];
      mean_g += std::abs(g) / static_cast<double>(c);
      mean_gx += std::abs(g * xhat) / static_cast<double>(c);
      dweight_terms[j] += std::abs(static_cast<double>(dout[r * c + j]) * xhat);
      dbias_terms[j] += std::abs(static_cast<double>(dout[r * c + j]));
    }
    for (size_t j = 0; j < c; ++j) {
      const double g = static_cast<double>(dout[r * c + j]) * (w ? static_cast<double>(w[j]) : 1.0);
      const double xhat = (static_cast<double>(x[r * c + j]) - mean[r]) * rstd[r];
      dx_terms[r * c + j] = rstd[r] * (std::abs(g) + mean_g + std::abs(xhat) * mean_gx);
    }
  }
  expect_rows_close(values_of<T>(got[3]), dx, "layer_norm_backward dx " + where, dx_terms);
  expect_rows_close(values_of<T>(got[4]), dweight, "layer_norm_backward dweight " + where, dweight_terms);
  expect_rows_close(values_of<T>(got[5]), dbias, "layer_norm_backward dbias " + where, dbias_terms);

  // Each of dx, dweight, dbias alone (the others null) gives the same bits.
  const auto alone = [&](T* ddx, T* ddw, T* ddb, const DeviceBuffer<T>& buffer, size_t index) {
    DeviceBuffer<T> zero(buffer.n);
    cuda_k::copy_device_to_device(buffer.ptr, zero.ptr, buffer.n * sizeof(T), stream());
    cuda_k::layer_norm_backward<T>(ddx, ddw, ddb, nullptr, d_dout.ptr, d_x.ptr, dw_in, d_mean.ptr, d_rstd.ptr,
                                   s.rows, s.channels, 1, stream());
    EXPECT_TRUE(bytes_of(buffer.read()) == got[index]) << where << ": output " << index << " alone";
  };
  alone(d_dx.ptr, nullptr, nullptr, d_dx, 3);
  alone(nullptr, d_dw.ptr, nullptr, d_dw, 4);
  alone(nullptr, nullptr, d_db.ptr, d_db, 5);
}

// Warp per row: channels 1, < 32, not a multiple of 32, long rows (W3's
// 768, and more); rows not a multiple of 8. Column sums: one tile of 8
// columns, tiles of 8 over 1000 channels (125 blocks), 32-column tiles over
// 9000 channels (282 blocks), more rows than the 32 row slices, 2 rows.
const NormShape kNormShapes[] = {{1003, 1, true, true, 0},   {300, 17, false, false, 10}, {517, 100, true, false, 0},
                                 {77, 768, false, true, 10}, {203, 1000, true, true, 0},  {9, 9000, true, true, 0},
                                 {2, 40, true, true, 0}};

TEST(CudaRows, LayerNormMatchesTheCpuAndRepeats) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  uint64_t seed = 100;
  for (const NormShape& s : kNormShapes) {
    layer_norm_parity<float>(s, seed += 4);
    layer_norm_parity<double>(s, seed += 4);
  }
}

struct RowSumCase {
  const char* what;
  std::vector<int64_t> shape, in_strides, out_strides;
  size_t in_elements;  // of the input buffer (a view may skip some)
};

template <class T>
void sum_to_parity(const RowSumCase& c, uint64_t seed) {
  const std::string where = std::string(sizeof(T) == 4 ? "float32 " : "float64 ") + c.what;
  int64_t out_numel = 1;
  for (size_t d = 0; d < c.shape.size(); ++d) out_numel *= c.out_strides[d] != 0 ? c.shape[d] : 1;
  const std::vector<T> in = random_values<T>(c.in_elements, -1, 1, seed);
  std::vector<T> cpu(static_cast<size_t>(out_numel));
  cpu_k::sum_to<T>(cpu.data(), out_numel, in.data(), c.in_strides, c.out_strides, c.shape);
  const DeviceBuffer<T> d_in(in);
  DeviceBuffer<T> d_out(cpu.size());
  const std::vector<Bytes> got = repeatable(where, [&] {
    cuda_k::sum_to<T>(d_out.ptr, out_numel, d_in.ptr, c.in_strides, c.out_strides, c.shape, stream());
    return std::vector<Bytes>{bytes_of(d_out.read())};
  });
  // Held to the size of the terms: sum_to of |in|.
  std::vector<T> magnitudes(in.size()), terms(cpu.size());
  for (size_t i = 0; i < in.size(); ++i) magnitudes[i] = std::abs(in[i]);
  cpu_k::sum_to<T>(terms.data(), out_numel, magnitudes.data(), c.in_strides, c.out_strides, c.shape);
  expect_rows_close(values_of<T>(got[0]), cpu, "sum_to " + where, std::vector<double>(terms.begin(), terms.end()));
}

TEST(CudaRows, SumToMatchesTheCpuAndRepeats) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const RowSumCase cases[] = {
      // Column sums: (rows, n) -> (n).
      {"(777, 1000) -> (1000)", {777, 1000}, {1000, 1}, {0, 1}, 777 * 1000},
      {"(3, 5, 37) -> (37)", {3, 5, 37}, {185, 37, 1}, {0, 0, 1}, 3 * 5 * 37},
      {"(5000, 5) -> (5)", {5000, 5}, {5, 1}, {0, 1}, 5000 * 5},
      {"(3, 9000) -> (9000)", {3, 9000}, {9000, 1}, {0, 1}, 3 * 9000},
      {"(300, 40) of rows 100 apart -> (40)", {300, 40}, {100, 1}, {0, 1}, 300 * 100},
      {"(1, 50) -> (50)", {1, 50}, {50, 1}, {0, 1}, 50},
      // The one-thread-an-output path.
      {"(4, 50, 6) -> (4, 1, 6)", {4, 50, 6}, {300, 6, 1}, {6, 0, 1}, 4 * 50 * 6},
      {"(30, 20) transposed -> (20)", {30, 20}, {1, 30}, {0, 1}, 30 * 20},
      {"(100, 7) -> ()", {100, 7}, {7, 1}, {0, 0}, 100 * 7},
  };
  uint64_t seed = 200;
  for (const RowSumCase& c : cases) {
    sum_to_parity<float>(c, ++seed);
    sum_to_parity<double>(c, ++seed);
  }
}

template <class T>
void max_along_rows_parity(const RowShape& s, uint64_t seed) {
  const size_t size = static_cast<size_t>(s.outer * s.n * s.inner), out = static_cast<size_t>(s.outer * s.inner);
  const std::string where = name_of(s, sizeof(T));
  // Few distinct values (ties everywhere, -0 and +0 among them), and NaNs:
  // none in most rows, one or two in others, at any place.
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T choices[] = {T(-1), T(-0.0), T(0), T(1), T(2)};
  std::mt19937_64 rng(seed);
  std::vector<T> x(size);
  for (T& v : x) v = choices[rng() % 5];
  for (int k = 0; k < static_cast<int>(out / 3); ++k) x[rng() % size] = nan;
  std::vector<T> cpu_values(out);
  std::vector<int64_t> cpu_indices(out);
  cpu_k::max_along<T>(cpu_values.data(), cpu_indices.data(), x.data(), s.outer, s.n, s.inner);
  const DeviceBuffer<T> d_x(x);
  DeviceBuffer<T> d_values(out);
  DeviceBuffer<int64_t> d_indices(out);
  const std::vector<Bytes> got = repeatable(where, [&] {
    cuda_k::max_along<T>(d_values.ptr, d_indices.ptr, d_x.ptr, s.outer, s.n, s.inner, stream());
    return std::vector<Bytes>{bytes_of(d_values.read()), bytes_of(d_indices.read())};
  });
  // The same element: the same bits (a NaN's, a zero's sign).
  EXPECT_TRUE(got[0] == bytes_of(cpu_values)) << "max_along values " << where;
  EXPECT_EQ(values_of<int64_t>(got[1]), cpu_indices) << "max_along indices " << where;
  // Values or indices alone.
  DeviceBuffer<int64_t> only_indices(out);
  cuda_k::max_along<T>(nullptr, only_indices.ptr, d_x.ptr, s.outer, s.n, s.inner, stream());
  EXPECT_EQ(only_indices.read(), cpu_indices) << "max_along indices alone " << where;
}

TEST(CudaRows, MaxAlongMatchesTheCpuWithTiesAndNaNs) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const RowShape shapes[] = {{1001, 1, 1}, {1003, 17, 1}, {517, 100, 1}, {9, 5000, 1}, {7, 33, 5}};
  uint64_t seed = 300;
  for (const RowShape& s : shapes) {
    max_along_rows_parity<float>(s, ++seed);
    max_along_rows_parity<double>(s, ++seed);
  }
}

}  // namespace
}  // namespace remat::kernels

#else

TEST(CudaRows, NeedACudaBuild) { GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): CUDA kernels not built"; }

#endif
