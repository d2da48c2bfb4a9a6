// strided_copy's path for three or more merged axes (kernels/cuda/copy.cu,
// Note [Copies of three or more axes]): attention's head permutes, a
// transpose inside a batch and a 5-axis permute move every element as the
// CPU's copy does, bit for bit, over many blocks, odd sizes, views that
// start one element past a 16-byte boundary, and 1-, 2-, 4- and 8-byte
// elements; and GPT's attention (nn/gpt.cpp's ops) takes that path for each
// of its copies of 3 or more axes (label cuda).
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/copy.h"
#include "kernels/cuda/copy.h"
#include "kernels/cuda/runtime.h"
#include "ops/ops.h"
#include "tests/support/gpu.h"
#if REMAT_CUDA_EMULATION
#include "kernels/cuda/emulation/control.h"
#endif

namespace remat::kernels {
namespace {

namespace cuda_k = kernels::cuda;
using cuda_k::CopyPath;

using test::stream;

// `values` on GPU 0 after `pad` elements, freed at scope exit.
template <class E>
struct Padded {
  Padded(const std::vector<E>& values, size_t pad) : n(values.size()) {
    base = static_cast<E*>(cuda_k::device_malloc((n + pad + 1) * sizeof(E), 0));
    ptr = base + pad;
    cuda_k::copy_host_to_device(ptr, values.data(), n * sizeof(E), stream());
  }
  ~Padded() { cuda_k::device_free(base, 0); }
  Padded(const Padded&) = delete;
  Padded& operator=(const Padded&) = delete;
  std::vector<E> read() const {
    std::vector<E> out(n);
    cuda_k::copy_device_to_host(out.data(), ptr, n * sizeof(E), stream());
    return out;
  }
  size_t n;
  E* base = nullptr;
  E* ptr = nullptr;
};

using test::dense_strides;

using test::element_count;

// The offset of element i (row-major over shape) through strides.
int64_t offset(int64_t i, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  int64_t at = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    at += i % shape[d] * strides[d];
    i /= shape[d];
  }
  return at;
}

// A copy of `shape` from a buffer of `src_size` elements read through
// src_strides into one of `dst_size` written through dst_strides.
struct Case {
  std::string name;
  std::vector<int64_t> shape, dst_strides, src_strides;
  int64_t dst_size, src_size;
};

// (B, T, H, D) <- (B, H, T, D): GPT's head merge and dq, dv in backward.
Case head_merge(int64_t b, int64_t t, int64_t h, int64_t d) {
  const std::vector<int64_t> shape{b, t, h, d};
  const int64_t n = b * t * h * d;
  return {"head merge " + std::to_string(d), shape, dense_strides(shape), {h * t * d, d, t * d, 1}, n, n};
}

template <class E>
void check_case(const Case& c) {
  const int64_t n = element_count(c.shape);
  std::vector<E> src(static_cast<size_t>(c.src_size));
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<E>(i * 2654435761u + 7);
  // The expected destination, element by element; untouched elements stay 0.
  std::vector<E> want(static_cast<size_t>(c.dst_size));
  for (int64_t i = 0; i < n; ++i) {
    want[static_cast<size_t>(offset(i, c.shape, c.dst_strides))] = src[static_cast<size_t>(offset(i, c.shape, c.src_strides))];
  }
  if (sizeof(E) > 1) {  // the CPU's strided_copy takes 2, 4 and 8 bytes
    std::vector<E> cpu(want.size());
    kernels::cpu::strided_copy(cpu.data(), c.dst_strides, src.data(), c.src_strides, sizeof(E), c.shape);
    ASSERT_EQ(std::memcmp(cpu.data(), want.data(), want.size() * sizeof(E)), 0) << c.name << ": the CPU's copy";
  }
  ASSERT_EQ(cuda_k::strided_copy_path(c.dst_strides, c.src_strides, c.shape), CopyPath::Rows) << c.name;
  for (size_t pad : {0, 1}) {
    const std::string what = c.name + ", " + std::to_string(sizeof(E)) + "-byte elements, pad " + std::to_string(pad);
    Padded<E> d_src(src, pad), d_dst(std::vector<E>(want.size()), pad);
    const uint64_t before = cuda_k::strided_copies_taken(CopyPath::Rows);
    cuda_k::strided_copy(d_dst.ptr, c.dst_strides, d_src.ptr, c.src_strides, sizeof(E), c.shape, stream());
    EXPECT_EQ(cuda_k::strided_copies_taken(CopyPath::Rows), before + 1) << what;
    const std::vector<E> got = d_dst.read();
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << what << " at " << i;
  }
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<Case> out;
    out.push_back(head_merge(3, 37, 5, 64));  // 555 rows of 64: aligned rows, 16-byte packs (35 blocks)
    out.push_back(head_merge(2, 33, 3, 13));  // rows of 13: elements one at a time
    out.push_back(head_merge(2, 9, 3, 300));  // rows longer than a block's threads move
    // (B, H, T, D) <- q of qkv (B, T, 3C): the view nn/gpt.cpp's heads() makes.
    {
      const int64_t b = 2, t = 41, h = 6, d = 32, c = h * d;
      out.push_back({"q out of qkv", {b, h, t, d}, dense_strides({b, h, t, d}), {t * 3 * c, d, 3 * c, 1}, b * h * t * d,
                     b * t * 3 * c});
    }
    // dk: (B, T, C) into a window of (B, T, 3C), read from (B, C, T): a
    // transpose inside each batch, columns strided on the source.
    {
      const int64_t b = 3, t = 45, c = 70;
      out.push_back({"transpose into a window", {b, t, c}, {t * 3 * c, 3 * c, 1}, {c * t, 1, t}, b * t * 3 * c,
                     b * c * t});
    }
    // Five axes, reversed: no two merge, columns strided on the source.
    {
      const std::vector<int64_t> shape{3, 4, 5, 6, 7};
      out.push_back({"5 axes reversed", shape, dense_strides(shape), {1, 3, 12, 60, 360}, element_count(shape), element_count(shape)});
    }
    return out;
  }();
  return all;
}

void check_cases() {
  for (const Case& c : cases()) {
    check_case<uint8_t>(c);
    check_case<uint16_t>(c);
    check_case<uint32_t>(c);
    check_case<uint64_t>(c);
  }
}

TEST(CudaCopy, ThreeOrMoreAxesMoveEveryElementByRows) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  check_cases();
#if REMAT_CUDA_EMULATION
  // Again with each block's threads in a shuffled order: the rows' offsets
  // must be read only after the barrier that follows their writing.
  const test::ShuffledThreads order(0x5eed);
  check_cases();
#endif
}

#if REMAT_CUDA_EMULATION
// The emulated GPU counts the blocks it runs: W3's head merge shape in
// small, (2, 40, 12, 64) float, aligned, takes 16 lanes of 16-byte packs a
// row (16 rows a block: 60 blocks); a view at element 1, 64 lanes of one
// float (4 rows a block: 240 blocks).
TEST(CudaCopy, AlignedHeadRowsMoveSixteenBytesAThread) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const Case c = head_merge(2, 40, 12, 64);
  const std::vector<float> src(static_cast<size_t>(c.src_size), 1.5f);
  const auto blocks_of = [&](size_t pad) {
    Padded<float> d_src(src, pad), d_dst(src, pad);
    cuda_k::synchronize(stream());
    const uint64_t before = remat_emulation::counters().blocks;
    cuda_k::strided_copy(d_dst.ptr, c.dst_strides, d_src.ptr, c.src_strides, sizeof(float), c.shape, stream());
    cuda_k::synchronize(stream());
    return remat_emulation::counters().blocks - before;
  };
  EXPECT_EQ(blocks_of(0), 960u / 16);
  EXPECT_EQ(blocks_of(1), 960u / 4);
}
#endif

TEST(CudaCopy, PathsFollowTheMergedAxes) {
  const std::vector<int64_t> shape{4, 5, 6};
  EXPECT_EQ(cuda_k::strided_copy_path(dense_strides(shape), dense_strides(shape), shape), CopyPath::Memcpy);
  EXPECT_EQ(cuda_k::strided_copy_path(dense_strides(shape), {5 * 6 + 3, 6, 1}, shape), CopyPath::TwoAxes);  // rows of a wider buffer
  EXPECT_EQ(cuda_k::strided_copy_path(dense_strides(shape), {6, 24, 1}, shape), CopyPath::Rows);
  EXPECT_EQ(cuda_k::strided_copy_path(dense_strides({4, 0, 6}), {0, 6, 1}, {4, 0, 6}), CopyPath::Nothing);
}

// GPT's attention as nn/gpt.cpp writes it, on the GPU: every copy of 3 or
// more axes it makes (the head merge forward; dq, dk and dv into qkv's
// gradient backward) takes the rows path, and the results are the CPU's.
TEST(CudaCopy, AttentionHeadCopiesTakeTheRowsPath) {
  REMAT_SKIP_WITHOUT_GPU("CUDA kernels");
  const int64_t B = 2, T = 24, H = 4, D = 16, C = H * D;
  Generator g(5);
  const Tensor qkv0 = normal({B, T, 3 * C}, 0, 1, DType::Float32, g), w = uniform({B, T, C}, -1, 1, DType::Float32, g);
  struct Result {
    Tensor y, dqkv;
  };
  const auto attention = [&](const Device& device) {
    const Tensor qkv = to(qkv0, device).requires_grad_();
    auto heads = [&](int64_t part) { return transpose(view(slice(qkv, 2, part * C, (part + 1) * C), {B, T, H, D}), 1, 2); };
    const Tensor q = heads(0), k = heads(1), v = heads(2);
    const Tensor att = causal_softmax(matmul(q, transpose(k, -2, -1), 1.0 / std::sqrt(static_cast<double>(D))));
    const Tensor y = reshape(transpose(matmul(att, v), 1, 2), {B, T, C});
    sum(mul(y, to(w, device))).backward();
    return Result{y.detach(), qkv.grad()};
  };
  const Result cpu = attention(Device::cpu());
  const uint64_t rows_before = cuda_k::strided_copies_taken(CopyPath::Rows);
  const Result gpu = attention(Device::cuda(0));
  EXPECT_EQ(cuda_k::strided_copies_taken(CopyPath::Rows) - rows_before, 4u)
      << "the head merge, dq, dk and dv: each a copy of 3 or more axes by rows";
  const auto expect_close = [](const Tensor& got, const Tensor& want, const char* what) {
    const std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < b.size(); ++i) ASSERT_LE(std::abs(a[i] - b[i]), 1e-5 * std::abs(b[i]) + 1e-6) << what << " at " << i;
  };
  expect_close(gpu.y, cpu.y, "attention output");
  expect_close(gpu.dqkv, cpu.dqkv, "qkv's gradient");
}

}  // namespace
}  // namespace remat::kernels

#else

TEST(CudaCopy, NeedACudaBuild) { GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): CUDA kernels not built"; }

#endif
