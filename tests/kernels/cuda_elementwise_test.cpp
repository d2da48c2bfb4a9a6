// The elementwise CUDA kernels' paths (kernels/cuda/elementwise.cuh): the
// 16-byte path (aligned, dense rows), the element path (a view starting at
// element 1, odd sizes, rows whose length breaks the alignment) and the
// per-element-division path (strides that do not merge into two axes; for
// strided_copy the rows path of cuda_copy_test.cpp instead) give the same
// bits as each other and as the CPU, for binary, unary, masked_fill,
// strided_copy, dropout and layer_norm_apply, over many blocks (label cuda).
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/binary.h"
#include "kernels/cpu/copy.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/mask.h"
#include "kernels/cpu/unary.h"
#include "kernels/cuda/binary.h"
#include "kernels/cuda/copy.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/mask.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/unary.h"
#include "kernels/unary_math.h"
#include "tests/support/gpu.h"
#if REMAT_CUDA_EMULATION
#include "kernels/cuda/emulation/control.h"
#endif

namespace remat::kernels {
namespace {

namespace cpu_k = kernels::cpu;
namespace cuda_k = kernels::cuda;
using test::random_values;

using test::stream;

// `n` elements of T on GPU 0 after `pad` elements (pad 1: a view that
// starts at element 1, 4 or 8 bytes past a 16-byte boundary), freed at
// scope exit.
template <class T>
struct PaddedArray {
  PaddedArray(const std::vector<T>& values, size_t pad = 0) : n(values.size()), pad(pad) {
    base = static_cast<T*>(cuda_k::device_malloc((n + pad + 1) * sizeof(T), 0));
    ptr = base + pad;
    if (n) cuda_k::copy_host_to_device(ptr, values.data(), n * sizeof(T), stream());
  }
  PaddedArray(size_t n, size_t pad) : PaddedArray(std::vector<T>(n), pad) {}
  ~PaddedArray() { cuda_k::device_free(base, 0); }
  PaddedArray(const PaddedArray&) = delete;
  PaddedArray& operator=(const PaddedArray&) = delete;
  std::vector<T> read() const {
    std::vector<T> out(n);
    if (n) cuda_k::copy_device_to_host(out.data(), ptr, n * sizeof(T), stream());
    return out;
  }
  size_t n, pad;
  T* base = nullptr;
  T* ptr = nullptr;
};

// The same bits (NaN included), as one failure line.
template <class T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(T)), 0) << what << " at " << i << ": got " << +got[i]
                                                             << ", want " << +want[i];
  }
}

// |got - want| <= rtol |want| + atol, as cuda_kernels_test.cpp.
template <class T>
void expect_elementwise_close(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  const double rtol = sizeof(T) == 4 ? 1e-5 : 1e-12, atol = sizeof(T) == 4 ? 1e-6 : 1e-14;
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    const double w = static_cast<double>(want[i]), g = static_cast<double>(got[i]);
    ASSERT_LE(std::abs(g - w), rtol * std::abs(w) + atol) << what << " at " << i << ": got " << g << ", want " << w;
  }
}

using test::dense_strides;

using test::element_count;

// `values` (dense over shape) stored with the axes reversed: strides that no
// two neighbouring axes share, so that the kernels take offsets_of's path
// (strided_copy: its rows path for three or more axes).
template <class T>
std::vector<T> reversed_storage(const std::vector<T>& values, const std::vector<int64_t>& shape,
                                std::vector<int64_t>& strides) {
  const std::vector<int64_t> reversed_shape(shape.rbegin(), shape.rend());
  const std::vector<int64_t> rs = dense_strides(reversed_shape);
  strides.assign(rs.rbegin(), rs.rend());
  const std::vector<int64_t> ds = dense_strides(shape);
  std::vector<T> out(values.size());
  for (int64_t i = 0; i < element_count(shape); ++i) {
    int64_t at = 0, rest = i;
    for (size_t d = 0; d < shape.size(); ++d) {
      at += rest / ds[d] * strides[d];
      rest %= ds[d];
    }
    out[static_cast<size_t>(at)] = values[static_cast<size_t>(i)];
  }
  return out;
}

constexpr BinaryOp kOps[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div};

template <class T>
void binary_paths() {
  // Dense, odd and over many blocks: aligned, then every operand at element 1.
  const std::vector<int64_t> shape{37, 41, 67};  // 101,639 elements, no axis merges once reversed
  const int64_t n = element_count(shape);
  const std::vector<T> a = random_values<T>(static_cast<size_t>(n), -3, 3, 1);
  const std::vector<T> b = random_values<T>(static_cast<size_t>(n), 0.5, 2, 2);
  const std::vector<int64_t> ds = dense_strides(shape);
  std::vector<int64_t> reversed;
  const std::vector<T> a_reversed = reversed_storage(a, shape, reversed);
  for (BinaryOp op : kOps) {
    const std::string what = "op " + std::to_string(static_cast<int>(op));
    std::vector<T> cpu(static_cast<size_t>(n));
    cpu_k::binary_forward<T>(op, cpu.data(), a.data(), ds, b.data(), ds, shape);
    for (size_t pad : {0, 1}) {
      PaddedArray<T> d_a(a, pad), d_b(b, pad), d_out(static_cast<size_t>(n), pad);
      cuda_k::binary_forward<T>(op, d_out.ptr, d_a.ptr, ds, d_b.ptr, ds, shape, stream());
      expect_same_bits(d_out.read(), cpu, what + " dense, pad " + std::to_string(pad));
    }
    {  // a read through reversed strides: offsets_of's division per element
      PaddedArray<T> d_a(a_reversed), d_b(b), d_out(static_cast<size_t>(n), 0);
      cuda_k::binary_forward<T>(op, d_out.ptr, d_a.ptr, reversed, d_b.ptr, ds, shape, stream());
      expect_same_bits(d_out.read(), cpu, what + " strided");
    }
  }
  // A bias over rows (b steps (0, 1)), rows of 768 (aligned) and 77 (odd),
  // and a scalar (b steps 0); in place, out = a, as gradient accumulation.
  for (int64_t cols : {768, 77}) {
    const std::vector<int64_t> rows_shape{301, cols};
    const int64_t m = element_count(rows_shape);
    const std::vector<T> x = random_values<T>(static_cast<size_t>(m), -3, 3, 3);
    const std::vector<T> bias = random_values<T>(static_cast<size_t>(cols), -1, 1, 4);
    for (const std::vector<int64_t>& b_strides : {std::vector<int64_t>{0, 1}, std::vector<int64_t>{0, 0}}) {
      for (BinaryOp op : kOps) {
        std::vector<T> cpu(static_cast<size_t>(m));
        cpu_k::binary_forward<T>(op, cpu.data(), x.data(), dense_strides(rows_shape), bias.data(), b_strides, rows_shape);
        const std::string what = "op " + std::to_string(static_cast<int>(op)) + ", cols " + std::to_string(cols) +
                                 (b_strides[1] ? ", bias" : ", scalar");
        for (size_t pad : {0, 1}) {
          PaddedArray<T> d_x(x, pad), d_bias(bias, pad);
          cuda_k::binary_forward<T>(op, d_x.ptr, d_x.ptr, dense_strides(rows_shape), d_bias.ptr, b_strides, rows_shape,
                                    stream());
          expect_same_bits(d_x.read(), cpu, what + ", in place, pad " + std::to_string(pad));
        }
      }
    }
  }
}

TEST(CudaElementwise, BinaryPathsGiveTheCpusBits) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  binary_paths<float>();
  binary_paths<double>();
}

// The elements of each test: many blocks, not a multiple of a pack.
constexpr size_t kLength = 200003;

// One math of kernels/unary_math.h, aligned and at element 1: the same
// bits; the CPU within cuda_kernels_test's tolerance.
template <class Math, class T>
void unary_paths_of() {
  const std::string name = Math::kName;
  const std::vector<T> x = random_values<T>(kLength, Math::kDomain.low, Math::kDomain.high, 5);
  const std::vector<T> dout = random_values<T>(kLength, -1, 1, 7);
  const int64_t n = static_cast<int64_t>(kLength);
  const cuda_k::Stream s = stream();
  std::vector<T> y(kLength), dx(kLength);
  cpu_k::unary_forward<Math>(y.data(), x.data(), n);
  PaddedArray<T> a_in(x, 0), a_out(kLength, 0), u_in(x, 1), u_out(kLength, 1);
  cuda_k::unary_forward<Math>(a_out.ptr, a_in.ptr, n, s);
  cuda_k::unary_forward<Math>(u_out.ptr, u_in.ptr, n, s);
  const std::vector<T> aligned = a_out.read();
  expect_same_bits(u_out.read(), aligned, name + " forward: at element 1 against aligned");
  expect_elementwise_close(aligned, y, name + " forward");
  // Backward reads dout and the input or the CPU's output, as the math says.
  const std::vector<T>& v = Math::kReads == UnaryReads::Output ? y : x;
  cpu_k::unary_backward<Math>(dx.data(), dout.data(), v.data(), n);
  PaddedArray<T> a_g(dout, 0), a_v(v, 0), a_dx(kLength, 0), u_g(dout, 1), u_v(v, 1), u_dx(kLength, 1);
  cuda_k::unary_backward<Math>(a_dx.ptr, a_g.ptr, a_v.ptr, n, s);
  cuda_k::unary_backward<Math>(u_dx.ptr, u_g.ptr, u_v.ptr, n, s);
  const std::vector<T> aligned_dx = a_dx.read();
  expect_same_bits(u_dx.read(), aligned_dx, name + " backward: at element 1 against aligned");
  expect_elementwise_close(aligned_dx, dx, name + " backward");
}

template <class T>
void unary_paths() {
#define REMAT_PATHS(Math) unary_paths_of<Math, T>();
  REMAT_UNARY_MATHS(REMAT_PATHS)
#undef REMAT_PATHS
  const std::vector<T> x = random_values<T>(kLength, -4, 4, 5);
  const cuda_k::Stream s = stream();
  // scale and fill: one multiply or none, the CPU's bits; sizes below a pack too.
  for (size_t n : {kLength, size_t{3}, size_t{1}}) {
    const std::vector<T> v(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n));
    std::vector<T> cpu(n);
    cpu_k::scale<T>(cpu.data(), v.data(), T(-1.5), static_cast<int64_t>(n));
    for (size_t pad : {0, 1}) {
      PaddedArray<T> d_in(v, pad), d_out(n, pad);
      cuda_k::scale<T>(d_out.ptr, d_in.ptr, T(-1.5), static_cast<int64_t>(n), s);
      expect_same_bits(d_out.read(), cpu, "scale, n " + std::to_string(n) + ", pad " + std::to_string(pad));
      cuda_k::fill<T>(d_out.ptr, T(0.25), static_cast<int64_t>(n), s);
      expect_same_bits(d_out.read(), std::vector<T>(n, T(0.25)), "fill, n " + std::to_string(n));
    }
  }
}

TEST(CudaElementwise, UnaryPathsGiveTheSameBitsAlignedOrNot) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  unary_paths<float>();
  unary_paths<double>();
}

#if REMAT_CUDA_EMULATION
// The emulated GPU counts the blocks it runs: aligned dense operands take
// the 16-byte path (a thread per 4 floats), a view at element 1 a thread per
// element.
TEST(CudaElementwise, AlignedDenseOperandsMoveSixteenBytesAThread) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const std::vector<float> x = random_values<float>(kLength, -1, 1, 14);
  const auto blocks_of = [&](size_t pad) {
    PaddedArray<float> d_x(x, pad), d_out(kLength, pad);
    cuda_k::synchronize(stream());
    const uint64_t before = remat_emulation::counters().blocks;
    cuda_k::unary_forward<Relu>(d_out.ptr, d_x.ptr, static_cast<int64_t>(kLength), stream());
    cuda_k::synchronize(stream());
    return remat_emulation::counters().blocks - before;
  };
  EXPECT_EQ(blocks_of(0), (kLength / 4 + 1 + 255) / 256);  // 50,001 packs and the last 3 elements
  EXPECT_EQ(blocks_of(1), (kLength + 255) / 256);
}
#endif

template <class T, class M>
void masked_fill_paths() {
  // The causal mask broadcast over (batch * heads): (12, 33, 33), the mask
  // stepping (0, 33, 1): two axes, (12, 1089), odd rows.
  const int64_t t = 33;
  const std::vector<int64_t> shape{12, t, t};
  const int64_t n = element_count(shape);
  const std::vector<T> x = random_values<T>(static_cast<size_t>(n), -2, 2, 9);
  std::vector<M> mask(static_cast<size_t>(t * t));
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = 0; j < t; ++j) mask[static_cast<size_t>(i * t + j)] = j > i ? M(1) : M(0);
  }
  const std::vector<int64_t> mask_strides{0, t, 1};
  std::vector<T> cpu(static_cast<size_t>(n));
  cpu_k::masked_fill_forward<T, M>(cpu.data(), x.data(), dense_strides(shape), mask.data(), mask_strides, shape, T(-1e9));
  for (size_t pad : {0, 1}) {
    PaddedArray<T> d_x(x, pad), d_out(static_cast<size_t>(n), pad);
    PaddedArray<M> d_mask(mask, pad);
    cuda_k::masked_fill_forward<T, M>(d_out.ptr, d_x.ptr, dense_strides(shape), d_mask.ptr, mask_strides, shape, T(-1e9),
                                      stream());
    expect_same_bits(d_out.read(), cpu, "masked_fill, pad " + std::to_string(pad));
  }
  std::vector<int64_t> reversed;
  const std::vector<T> x_reversed = reversed_storage(x, shape, reversed);
  PaddedArray<T> d_x(x_reversed), d_out(static_cast<size_t>(n), 0);
  PaddedArray<M> d_mask(mask);
  cuda_k::masked_fill_forward<T, M>(d_out.ptr, d_x.ptr, reversed, d_mask.ptr, mask_strides, shape, T(-1e9), stream());
  expect_same_bits(d_out.read(), cpu, "masked_fill, x strided");
}

TEST(CudaElementwise, MaskedFillPathsGiveTheCpusBits) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  masked_fill_paths<float, int64_t>();
  masked_fill_paths<float, float>();
  masked_fill_paths<double, int64_t>();
  masked_fill_paths<double, double>();
}

template <class E>
void copy_paths() {
  const std::vector<int64_t> shape{29, 31, 37};  // 33,263 elements
  const int64_t n = element_count(shape);
  std::vector<E> values(static_cast<size_t>(n));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<E>(i * 2654435761u);
  const std::vector<int64_t> ds = dense_strides(shape);
  for (size_t pad : {0, 1}) {
    const std::string p = ", pad " + std::to_string(pad) + ", " + std::to_string(sizeof(E)) + "-byte elements";
    // Dense on both sides: one device-to-device copy.
    PaddedArray<E> d_src(values, pad), d_dst(static_cast<size_t>(n), pad);
    cuda_k::strided_copy(d_dst.ptr, d_src.ptr, sizeof(E), shape, ds, stream());
    expect_same_bits(d_dst.read(), values, "dense copy" + p);
    // The first 31 * 37 columns of a (29, 31 * 37 + 3) buffer: two axes.
    const int64_t wide = 31 * 37 + 3;
    std::vector<E> padded(static_cast<size_t>(29 * wide));
    for (int64_t r = 0; r < 29; ++r) {
      for (int64_t c = 0; c < 31 * 37; ++c) padded[static_cast<size_t>(r * wide + c)] = values[static_cast<size_t>(r * 31 * 37 + c)];
    }
    PaddedArray<E> d_padded(padded, pad), d_out(static_cast<size_t>(n), pad);
    cuda_k::strided_copy(d_out.ptr, d_padded.ptr, sizeof(E), shape, {wide, 37, 1}, stream());
    expect_same_bits(d_out.read(), values, "rows of a wider buffer" + p);
    // Into a strided destination: the two-strided overload, back again.
    PaddedArray<E> d_back(padded.size(), pad);
    cuda_k::strided_copy(d_back.ptr, {wide, 37, 1}, d_out.ptr, ds, sizeof(E), shape, stream());
    expect_same_bits(d_back.read(), padded, "into rows of a wider buffer" + p);  // the last 3 columns: 0 in both
  }
  // Reversed axes: the rows path of three or more axes, against the CPU.
  std::vector<int64_t> reversed;
  const std::vector<E> stored = reversed_storage(values, shape, reversed);
  PaddedArray<E> d_stored(stored), d_out(static_cast<size_t>(n), 0);
  cuda_k::strided_copy(d_out.ptr, d_stored.ptr, sizeof(E), shape, reversed, stream());
  if (sizeof(E) > 1) {  // the CPU's strided_copy takes 2, 4 and 8 bytes (1 copies nothing)
    std::vector<E> cpu(static_cast<size_t>(n));
    cpu_k::strided_copy(cpu.data(), stored.data(), sizeof(E), shape, reversed);
    expect_same_bits(cpu, values, "the CPU's reversed copy");
  }
  expect_same_bits(d_out.read(), values, "reversed copy");
}

TEST(CudaElementwise, CopyPathsMoveEveryElement) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  copy_paths<uint8_t>();
  copy_paths<uint16_t>();
  copy_paths<uint32_t>();
  copy_paths<uint64_t>();
}

template <class T>
void dropout_paths() {
  const DropoutMask mask{.seed = 99, .offset = 5, .threshold = static_cast<uint32_t>(std::ceil(0.3 * 16777216.0))};
  for (size_t n : {kLength, size_t{6}, size_t{3}}) {
    const std::vector<T> x = random_values<T>(n, -2, 2, 10);
    std::vector<T> cpu(n);
    cpu_k::dropout_forward<T>(cpu.data(), x.data(), static_cast<int64_t>(n), mask, T(1) / T(0.7));
    for (size_t pad : {0, 1}) {
      PaddedArray<T> d_x(x, pad), d_out(n, pad);
      cuda_k::dropout_forward<T>(d_out.ptr, d_x.ptr, static_cast<int64_t>(n), mask, T(1) / T(0.7), stream());
      expect_same_bits(d_out.read(), cpu, "dropout, n " + std::to_string(n) + ", pad " + std::to_string(pad));
      cuda_k::dropout_backward<T>(d_out.ptr, d_x.ptr, static_cast<int64_t>(n), mask, T(1) / T(0.7), stream());
      expect_same_bits(d_out.read(), cpu, "dropout backward, n " + std::to_string(n));
    }
  }
}

TEST(CudaElementwise, DropoutPathsKeepTheCpusElements) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  dropout_paths<float>();
  dropout_paths<double>();
}

template <class T>
void layer_norm_apply_rows() {
  for (int64_t channels : {768, 77, 1}) {
    const int64_t rows = 1031;
    const size_t n = static_cast<size_t>(rows * channels);
    const std::vector<T> x = random_values<T>(n, -2, 3, 11);
    const std::vector<T> weight = random_values<T>(static_cast<size_t>(channels), 0.5, 1.5, 12);
    const std::vector<T> bias = random_values<T>(static_cast<size_t>(channels), -1, 1, 13);
    std::vector<T> out(n), mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
    cpu_k::layer_norm_forward<T>(out.data(), mean.data(), rstd.data(), x.data(), weight.data(), bias.data(), rows,
                                 channels, 1e-5);
    std::vector<T> cpu(n), cpu_plain(n);
    cpu_k::layer_norm_apply<T>(cpu.data(), mean.data(), rstd.data(), x.data(), weight.data(), bias.data(), rows,
                               channels);
    cpu_k::layer_norm_apply<T>(cpu_plain.data(), mean.data(), rstd.data(), x.data(), nullptr, nullptr, rows, channels);
    PaddedArray<T> d_x(x), d_w(weight), d_b(bias), d_mean(mean), d_rstd(rstd), d_out(n, 0);
    const std::string what = "layer_norm_apply, channels " + std::to_string(channels);
    cuda_k::layer_norm_apply<T>(d_out.ptr, d_mean.ptr, d_rstd.ptr, d_x.ptr, d_w.ptr, d_b.ptr, rows, channels, stream());
    expect_elementwise_close(d_out.read(), cpu, what);
    cuda_k::layer_norm_apply<T>(d_out.ptr, d_mean.ptr, d_rstd.ptr, d_x.ptr, nullptr, nullptr, rows, channels, stream());
    expect_elementwise_close(d_out.read(), cpu_plain, what + ", no weight or bias");
  }
}

TEST(CudaElementwise, LayerNormApplyByRowsMatchesTheCpu) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  layer_norm_apply_rows<float>();
  layer_norm_apply_rows<double>();
}

}  // namespace
}  // namespace remat::kernels

#else

TEST(CudaElementwise, NeedACudaBuild) { GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): CUDA kernels not built"; }

#endif
