// The fused attention kernels on the GPU (kernels/cuda/flash_attention.cu)
// against a plain reference computed here on the host in double: the
// explicit softmax(scale q k^T + mask) v and its gradients (label cuda;
// skipped, with a message, where no GPU is present or the build has no
// CUDA). Causal and full, multi-head, grouped- and multi-query, T = 1 to 97
// (not multiples of the tiles), D = 16 to 256, dense and strided operands
// (transposed views of (B, T, H, D) projections, out beside a head it must
// not touch). Every output starts as NaN, so one left unwritten shows; a
// second run, and one with the emulated GPU's threads shuffled, give the
// same bits. Values agree when |gpu - ref| <= rtol |ref| + atol.
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/attention_dims.h"
#include "kernels/cuda/flash_attention.h"
#include "tests/support/gpu.h"

#if REMAT_CUDA_EMULATION
#include "kernels/cuda/emulation/control.h"
#endif

namespace remat::kernels {
namespace {

namespace cuda_k = kernels::cuda;
using test::DeviceBuffer;
using test::random_values;

constexpr double kSentinel = 7.0;  // what out's spare head holds before and after

// One case. Dense: q, k, v and out (B, H, T, D) dense. Strided: q a
// transposed view of a (B, Tq, Hq, D) projection, k and v of one (B, Tk,
// 2 Hkv, D) projection (heads 0..Hkv-1 and Hkv..2Hkv-1), out and dout of a
// (B, Tq, Hq + 1, D) buffer whose last head the kernels must not touch.
struct FlashCase {
  int64_t batch, heads, kv_heads, q_len, kv_len, head_dim;
  bool causal;
  bool strided;
  double scale = 0;  // 0: 1 / sqrt(D)
};

std::string flash_name(const FlashCase& c) {
  return "B " + std::to_string(c.batch) + ", Hq " + std::to_string(c.heads) + ", Hkv " + std::to_string(c.kv_heads) +
         ", Tq " + std::to_string(c.q_len) + ", Tk " + std::to_string(c.kv_len) + ", D " + std::to_string(c.head_dim) +
         (c.causal ? ", causal" : ", full") + (c.strided ? ", strided" : ", dense");
}

AttentionDims dims_of(const FlashCase& c) {
  return {.batch = c.batch,
          .heads = c.heads,
          .kv_heads = c.kv_heads,
          .q_len = c.q_len,
          .kv_len = c.kv_len,
          .head_dim = c.head_dim,
          .causal = c.causal,
          .scale = c.scale != 0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim))};
}

// An operand (B, H, T, D) inside a host buffer: element (b, h, t, d) at
// offset + b batch + h head + t token + d.
struct View {
  AttentionLayout layout;
  int64_t offset = 0;
  int64_t index(int64_t b, int64_t h, int64_t t, int64_t d) const {
    return offset + b * layout.batch + h * layout.head + t * layout.token + d;
  }
};

// The host buffers of a case and where each operand lies in them.
template <class T>
struct Inputs {
  std::vector<T> q_buf, kv_buf, dout_buf;  // q; k and v; dout (out's buffer has its size)
  View q, k, v, out;                       // out and dout share a view
};

template <class T>
Inputs<T> inputs_of(const FlashCase& c, uint64_t seed) {
  const int64_t B = c.batch, Hq = c.heads, Hkv = c.kv_heads, Tq = c.q_len, Tk = c.kv_len, D = c.head_dim;
  Inputs<T> in;
  if (c.strided) {
    in.q = {{Tq * Hq * D, D, Hq * D}, 0};
    in.k = {{Tk * 2 * Hkv * D, D, 2 * Hkv * D}, 0};
    in.v = {in.k.layout, Hkv * D};
    in.out = {{Tq * (Hq + 1) * D, D, (Hq + 1) * D}, 0};
  } else {
    in.q = {dense_attention_layout(Hq, Tq, D), 0};
    in.k = {dense_attention_layout(Hkv, Tk, D), 0};
    in.v = {in.k.layout, B * Hkv * Tk * D};
    in.out = {dense_attention_layout(Hq, Tq, D), 0};
  }
  const int64_t out_size = c.strided ? B * Tq * (Hq + 1) * D : B * Hq * Tq * D;
  in.q_buf = random_values<T>(static_cast<size_t>(B * Hq * Tq * D), -2, 2, seed);
  in.kv_buf = random_values<T>(static_cast<size_t>(2 * B * Hkv * Tk * D), -1, 1, seed + 1);
  in.dout_buf = random_values<T>(static_cast<size_t>(out_size), -1, 1, seed + 2);
  return in;
}

// The reference, dense (B, H, T, D) in double: S = scale q k^T (+ mask),
// P = softmax(S), out = P v, lse = log sum exp S; dP = dout v^T,
// dS = P * (dP - rowsum(P * dP)), dq = scale dS k, dk = scale dS^T q,
// dv = P^T dout, dk and dv summed over each kv head's query heads.
struct Reference {
  std::vector<double> out, lse, dq, dk, dv;
};

template <class T>
Reference reference_of(const FlashCase& c, const Inputs<T>& in) {
  const int64_t B = c.batch, Hq = c.heads, Hkv = c.kv_heads, Tq = c.q_len, Tk = c.kv_len, D = c.head_dim;
  const double scale = dims_of(c).scale;
  Reference ref;
  ref.out.assign(static_cast<size_t>(B * Hq * Tq * D), 0);
  ref.lse.assign(static_cast<size_t>(B * Hq * Tq), 0);
  ref.dq.assign(ref.out.size(), 0);
  ref.dk.assign(static_cast<size_t>(B * Hkv * Tk * D), 0);
  ref.dv.assign(ref.dk.size(), 0);
  const auto q = [&](int64_t b, int64_t h, int64_t t, int64_t d) {
    return static_cast<double>(in.q_buf[static_cast<size_t>(in.q.index(b, h, t, d))]);
  };
  const auto k = [&](int64_t b, int64_t g, int64_t t, int64_t d) {
    return static_cast<double>(in.kv_buf[static_cast<size_t>(in.k.index(b, g, t, d))]);
  };
  const auto v = [&](int64_t b, int64_t g, int64_t t, int64_t d) {
    return static_cast<double>(in.kv_buf[static_cast<size_t>(in.v.index(b, g, t, d))]);
  };
  const auto dout = [&](int64_t b, int64_t h, int64_t t, int64_t d) {
    return static_cast<double>(in.dout_buf[static_cast<size_t>(in.out.index(b, h, t, d))]);
  };
  const auto dense = [&](int64_t b, int64_t h, int64_t heads, int64_t len, int64_t t) {
    return static_cast<size_t>(((b * heads + h) * len + t) * D);
  };
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / (Hq / Hkv);
      for (int64_t i = 0; i < Tq; ++i) {
        const int64_t seen = c.causal ? i + 1 : Tk;  // keys 0..seen-1
        std::vector<double> p(static_cast<size_t>(seen)), dp(static_cast<size_t>(seen));
        double m = -std::numeric_limits<double>::infinity(), total = 0;
        for (int64_t j = 0; j < seen; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += q(b, h, i, d) * k(b, g, j, d);
          p[static_cast<size_t>(j)] = scale * s;
          m = std::max(m, scale * s);
        }
        for (double& pj : p) total += (pj = std::exp(pj - m));
        ref.lse[static_cast<size_t>((b * Hq + h) * Tq + i)] = seen ? m + std::log(total) : m;
        double rowsum = 0;  // sum_j P_ij dP_ij
        for (int64_t j = 0; j < seen; ++j) {
          double& pj = p[static_cast<size_t>(j)];
          pj /= total;
          double dpj = 0;
          for (int64_t d = 0; d < D; ++d) {
            ref.out[dense(b, h, Hq, Tq, i) + static_cast<size_t>(d)] += pj * v(b, g, j, d);
            dpj += dout(b, h, i, d) * v(b, g, j, d);
          }
          dp[static_cast<size_t>(j)] = dpj;
          rowsum += pj * dpj;
        }
        for (int64_t j = 0; j < seen; ++j) {
          const double pj = p[static_cast<size_t>(j)], ds = pj * (dp[static_cast<size_t>(j)] - rowsum);
          for (int64_t d = 0; d < D; ++d) {
            ref.dq[dense(b, h, Hq, Tq, i) + static_cast<size_t>(d)] += scale * ds * k(b, g, j, d);
            ref.dk[dense(b, g, Hkv, Tk, j) + static_cast<size_t>(d)] += scale * ds * q(b, h, i, d);
            ref.dv[dense(b, g, Hkv, Tk, j) + static_cast<size_t>(d)] += pj * dout(b, h, i, d);
          }
        }
      }
    }
  }
  return ref;
}

// What the GPU wrote: out's whole buffer (spare head included), lse, dq, dk, dv.
template <class T>
struct GpuResult {
  std::vector<T> out_buf, lse, dq, dk, dv;
  bool operator==(const GpuResult& other) const {  // bit for bit
    const auto same = [](const std::vector<T>& a, const std::vector<T>& b) {
      return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
    };
    return same(out_buf, other.out_buf) && same(lse, other.lse) && same(dq, other.dq) && same(dk, other.dk) &&
           same(dv, other.dv);
  }
};

// Forward, then backward reading the forward's out and lse, on GPU 0; every
// output starts as NaN (out's buffer as kSentinel).
template <class T>
GpuResult<T> run_gpu(const FlashCase& c, const Inputs<T>& in) {
  const AttentionDims dims = dims_of(c);
  const auto n = [](int64_t count) { return static_cast<size_t>(count); };
  const T nan = std::numeric_limits<T>::quiet_NaN();
  DeviceBuffer<T> q(in.q_buf), kv(in.kv_buf), dout(in.dout_buf);
  DeviceBuffer<T> out(std::vector<T>(in.dout_buf.size(), static_cast<T>(kSentinel)));
  DeviceBuffer<T> lse(std::vector<T>(n(c.batch * c.heads * c.q_len), nan));
  DeviceBuffer<T> dq(std::vector<T>(n(c.batch * c.heads * c.q_len * c.head_dim), nan));
  DeviceBuffer<T> dk(std::vector<T>(n(c.batch * c.kv_heads * c.kv_len * c.head_dim), nan));
  DeviceBuffer<T> dv(std::vector<T>(dk.n, nan));
  const cuda_k::Stream s = DeviceBuffer<T>::stream();
  cuda_k::flash_attention_forward<T>(out.ptr + in.out.offset, lse.ptr, q.ptr + in.q.offset, kv.ptr + in.k.offset,
                                     kv.ptr + in.v.offset, dims, in.q.layout, in.k.layout, in.v.layout, in.out.layout,
                                     s);
  cuda_k::flash_attention_backward<T>(dq.ptr, dk.ptr, dv.ptr, dout.ptr + in.out.offset, q.ptr + in.q.offset,
                                      kv.ptr + in.k.offset, kv.ptr + in.v.offset, out.ptr + in.out.offset, lse.ptr,
                                      dims, in.q.layout, in.k.layout, in.v.layout, in.out.layout,
                                      dense_grad_layouts(dims), s);
  return {out.read(), lse.read(), dq.read(), dk.read(), dv.read()};
}

// The first element with |got - want| > rtol |want| + atol (an infinite
// want must be met exactly).
void expect_flash_close(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isinf(want[i])) {
      ASSERT_EQ(got[i], want[i]) << what << " at " << i;
      continue;
    }
    ASSERT_LE(std::abs(got[i] - want[i]), rtol * std::abs(want[i]) + atol)
        << what << " at " << i << ": got " << got[i] << ", the reference has " << want[i];
  }
}

template <class T>
std::vector<double> widened(const std::vector<T>& v) {
  return {v.begin(), v.end()};
}

#if REMAT_CUDA_EMULATION
using test::ShuffledThreads;
#endif

template <class T>
void check_flash(const FlashCase& c) {
  SCOPED_TRACE(flash_name(c) + (sizeof(T) == 4 ? ", float32" : ", float64"));
  // float32 sums of up to 256 products and 97 keys, against double.
  const double rtol = sizeof(T) == 4 ? 1e-4 : 1e-10, atol = sizeof(T) == 4 ? 1e-5 : 1e-12;
  const Inputs<T> in = inputs_of<T>(c, 11);
  const Reference ref = reference_of(c, in);
  const GpuResult<T> gpu = run_gpu(c, in);

  std::vector<double> out(ref.out.size());  // out gathered from its view, dense
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t i = 0; i < c.q_len; ++i) {
        for (int64_t d = 0; d < c.head_dim; ++d) {
          out[static_cast<size_t>(((b * c.heads + h) * c.q_len + i) * c.head_dim + d)] =
              static_cast<double>(gpu.out_buf[static_cast<size_t>(in.out.index(b, h, i, d))]);
        }
      }
    }
  }
  expect_flash_close(out, ref.out, rtol, atol, "out");
  expect_flash_close(widened(gpu.lse), ref.lse, rtol, atol, "lse");
  expect_flash_close(widened(gpu.dq), ref.dq, rtol, atol, "dq");
  expect_flash_close(widened(gpu.dk), ref.dk, rtol, atol, "dk");
  expect_flash_close(widened(gpu.dv), ref.dv, rtol, atol, "dv");
  if (c.strided) {  // the spare head of out's buffer is untouched
    for (int64_t b = 0; b < c.batch; ++b) {
      for (int64_t i = 0; i < c.q_len; ++i) {
        for (int64_t d = 0; d < c.head_dim; ++d) {
          ASSERT_EQ(gpu.out_buf[static_cast<size_t>(in.out.index(b, c.heads, i, d))], static_cast<T>(kSentinel))
              << "out's spare head written at b " << b << ", t " << i << ", d " << d;
        }
      }
    }
  }

  EXPECT_TRUE(run_gpu(c, in) == gpu) << "a second run gave other bits";
#if REMAT_CUDA_EMULATION
  const ShuffledThreads shuffled(0x5eed);
  EXPECT_TRUE(run_gpu(c, in) == gpu) << "a run with the threads shuffled gave other bits";
#endif
}

template <class... Cases>
void check_both(const Cases&... cases) {
  (check_flash<float>(cases), ...);
  (check_flash<double>(cases), ...);
}

TEST(CudaFlashAttention, MultiHeadMatchesTheReference) {
  REMAT_SKIP_WITHOUT_GPU("flash attention on cuda:0");
  check_both(FlashCase{2, 2, 2, 5, 5, 16, true, false},      // less than a tile
             FlashCase{1, 2, 2, 64, 64, 128, false, false},  // whole tiles
             FlashCase{1, 2, 2, 97, 97, 64, true, true});    // a partial last tile, strided
}

TEST(CudaFlashAttention, GroupedQueryMatchesTheReference) {
  REMAT_SKIP_WITHOUT_GPU("flash attention on cuda:0");
  check_both(FlashCase{1, 4, 2, 97, 97, 80, true, true},    // D not a multiple of 32
             FlashCase{2, 4, 2, 5, 5, 64, false, false});
}

TEST(CudaFlashAttention, MultiQueryMatchesTheReference) {
  REMAT_SKIP_WITHOUT_GPU("flash attention on cuda:0");
  check_both(FlashCase{1, 3, 1, 64, 97, 64, false, true, 0.3},  // Tq != Tk
             FlashCase{1, 2, 1, 1, 1, 128, true, true},         // T = 1
             FlashCase{1, 2, 1, 97, 97, 16, false, false, -1.5});  // any scale, a negative one too
}

TEST(CudaFlashAttention, LargestHeadDimMatchesTheReference) {
  REMAT_SKIP_WITHOUT_GPU("flash attention on cuda:0");
  // D = 256: above 48 KB of shared memory in both dtypes (the kernels raise their limit).
  check_both(FlashCase{1, 1, 1, 33, 33, cuda_k::kFlashMaxHeadDim, true, true});
}

TEST(CudaFlashAttention, EmptySequencesWriteZeros) {
  REMAT_SKIP_WITHOUT_GPU("flash attention on cuda:0");
  // No keys: out and dq 0, lse -inf. No queries: dk and dv 0.
  check_both(FlashCase{1, 2, 1, 3, 0, 16, false, false}, FlashCase{1, 2, 1, 0, 5, 16, false, true});
}

// The message of what `call` throws, or "" when it returns.
template <class Call>
std::string error_of(Call call) {
  try {
    call();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(CudaFlashAttention, RefusesWhatItCannotRun) {
  REMAT_SKIP_WITHOUT_GPU("flash attention on cuda:0");
  const cuda_k::Stream s = DeviceBuffer<float>::stream();
  const auto forward = [&](const FlashCase& c) {
    return error_of([&] {
      const AttentionLayout l{};
      cuda_k::flash_attention_forward<float>(nullptr, nullptr, nullptr, nullptr, nullptr, dims_of(c), l, l, l, l, s);
    });
  };
  const auto backward = [&](const FlashCase& c) {
    return error_of([&] {
      const AttentionLayout l{};
      cuda_k::flash_attention_backward<float>(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                              nullptr, dims_of(c), l, l, l, l, {l, l, l}, s);
    });
  };
  const FlashCase too_wide{1, 2, 2, 4, 4, cuda_k::kFlashMaxHeadDim + 1, true, false};
  EXPECT_NE(forward(too_wide).find("head_dim D = 257: the CUDA kernels take 1 to 256"), std::string::npos)
      << forward(too_wide);
  EXPECT_NE(backward(too_wide).find("head_dim D = 257"), std::string::npos) << backward(too_wide);
  const FlashCase bad_groups{1, 3, 2, 4, 4, 16, true, false};
  EXPECT_NE(forward(bad_groups).find("Hq = 3 query heads is not a multiple of Hkv = 2"), std::string::npos)
      << forward(bad_groups);
  const FlashCase causal_cross{1, 2, 2, 4, 6, 16, true, false};
  EXPECT_NE(backward(causal_cross).find("causal attention needs Tq == Tk, got Tq = 4 and Tk = 6"), std::string::npos)
      << backward(causal_cross);
}

}  // namespace
}  // namespace remat::kernels

#else

TEST(CudaFlashAttention, NeedACudaBuild) {
  GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): flash attention on the GPU not built";
}

#endif
