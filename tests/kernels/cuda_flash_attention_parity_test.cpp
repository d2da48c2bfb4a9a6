// The fused attention kernels of both devices on the same inputs (label
// cuda): out, lse, dq, dk and dv of kernels/cuda/flash_attention.h against
// kernels/cpu/flash_attention.h,
// causal and full, MHA/GQA/MQA, dense and strided operands, float and
// double. Values agree when |gpu - cpu| <= rtol |cpu| + atol (float32 1e-4
// and 1e-5, float64 1e-10 and 1e-12: the devices add in different orders).
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention_dims.h"
#include "kernels/cpu/flash_attention.h"
#include "kernels/cuda/flash_attention.h"
#include "tests/support/gpu.h"

namespace remat::kernels {
namespace {

using test::DeviceBuffer;
using test::random_values;

struct ParityCase {
  int64_t batch, heads, kv_heads, q_len, kv_len, head_dim;
  bool causal;
  bool strided;  // q (B, Tq, Hq, D), k and v (B, Tk, 2 Hkv, D), out and dout (B, Tq, Hq, D) buffers, as views
};

template <class T>
void expect_parity(const std::vector<T>& gpu, const std::vector<T>& cpu, const std::string& what) {
  const double rtol = sizeof(T) == 4 ? 1e-4 : 1e-10, atol = sizeof(T) == 4 ? 1e-5 : 1e-12;
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double want = static_cast<double>(cpu[i]), got = static_cast<double>(gpu[i]);
    if (std::isinf(want)) {
      ASSERT_EQ(got, want) << what << " at " << i;
      continue;
    }
    ASSERT_LE(std::abs(got - want), rtol * std::abs(want) + atol)
        << what << " at " << i << ": got " << got << ", the CPU has " << want;
  }
}

template <class T>
void check(const ParityCase& c) {
  const int64_t B = c.batch, Hq = c.heads, Hkv = c.kv_heads, Tq = c.q_len, Tk = c.kv_len, D = c.head_dim;
  SCOPED_TRACE("B " + std::to_string(B) + ", Hq " + std::to_string(Hq) + ", Hkv " + std::to_string(Hkv) + ", Tq " +
               std::to_string(Tq) + ", Tk " + std::to_string(Tk) + ", D " + std::to_string(D) +
               (c.causal ? ", causal" : ", full") + (c.strided ? ", strided" : ", dense") +
               (sizeof(T) == 4 ? ", float32" : ", float64"));
  const AttentionDims dims{.batch = B, .heads = Hq, .kv_heads = Hkv, .q_len = Tq, .kv_len = Tk, .head_dim = D,
                           .causal = c.causal, .scale = 1.0 / std::sqrt(static_cast<double>(D))};
  const AttentionLayout ql = c.strided ? AttentionLayout{Tq * Hq * D, D, Hq * D} : dense_attention_layout(Hq, Tq, D);
  const AttentionLayout kvl =
      c.strided ? AttentionLayout{Tk * 2 * Hkv * D, D, 2 * Hkv * D} : dense_attention_layout(Hkv, Tk, D);
  const AttentionLayout ol = c.strided ? AttentionLayout{Tq * Hq * D, D, Hq * D} : dense_attention_layout(Hq, Tq, D);
  const int64_t v_offset = c.strided ? Hkv * D : B * Hkv * Tk * D;  // v's first element in kv
  const auto n = [](int64_t count) { return static_cast<size_t>(count); };
  const std::vector<T> q = random_values<T>(n(B * Hq * Tq * D), -2, 2, 21);
  const std::vector<T> kv = random_values<T>(n(2 * B * Hkv * Tk * D), -1, 1, 22);
  const std::vector<T> dout = random_values<T>(n(B * Hq * Tq * D), -1, 1, 23);

  // The gradients where the operands are: strided cases write dk and dv
  // into one (B, Tk, 2 Hkv D) tensor, as a packed projection's gradient.
  const AttentionGradLayouts gl = c.strided ? AttentionGradLayouts{ql, kvl, kvl} : dense_grad_layouts(dims);
  std::vector<T> out(n(B * Hq * Tq * D)), lse(n(B * Hq * Tq)), dq(out.size()), dkv(kv.size());
  cpu::flash_attention_forward<T>(out.data(), lse.data(), q.data(), kv.data(), kv.data() + v_offset, dims, ql, kvl,
                                  kvl, ol);
  cpu::flash_attention_backward<T>(dq.data(), dkv.data(), dkv.data() + v_offset, dout.data(), q.data(), kv.data(),
                                   kv.data() + v_offset, out.data(), lse.data(), dims, ql, kvl, kvl, ol, gl);

  DeviceBuffer<T> d_q(q), d_kv(kv), d_dout(dout), d_out(out.size()), d_lse(lse.size()), d_dq(dq.size()),
      d_dkv(dkv.size());
  const cuda::Stream s = DeviceBuffer<T>::stream();
  cuda::flash_attention_forward<T>(d_out.ptr, d_lse.ptr, d_q.ptr, d_kv.ptr, d_kv.ptr + v_offset, dims, ql, kvl, kvl,
                                   ol, s);
  // Backward from the same out on both devices: the CPU's.
  const DeviceBuffer<T> cpu_out(out);
  const DeviceBuffer<T> cpu_lse(lse);
  cuda::flash_attention_backward<T>(d_dq.ptr, d_dkv.ptr, d_dkv.ptr + v_offset, d_dout.ptr, d_q.ptr, d_kv.ptr,
                                    d_kv.ptr + v_offset, cpu_out.ptr, cpu_lse.ptr, dims, ql, kvl, kvl, ol, gl, s);
  expect_parity(d_out.read(), out, "out");
  expect_parity(d_lse.read(), lse, "lse");
  expect_parity(d_dq.read(), dq, "dq");
  expect_parity(d_dkv.read(), dkv, "dk and dv");
}

TEST(CudaFlashAttentionParity, MatchesTheCpu) {
  REMAT_SKIP_WITHOUT_GPU("flash attention on cuda:0");
  for (const ParityCase& c : {ParityCase{2, 2, 2, 5, 5, 16, true, false}, ParityCase{1, 4, 2, 97, 97, 80, true, true},
                        ParityCase{1, 3, 1, 64, 97, 64, false, true}, ParityCase{1, 2, 1, 1, 1, 128, true, false}}) {
    check<float>(c);
    check<double>(c);
  }
}

}  // namespace
}  // namespace remat::kernels

#endif
