// Micro benchmarks of the CPU kernels, for comparing with the hardware's
// limits and with PyTorch on the same BLAS (see docs/workloads.md):
//   BM_Gemm  1024^3 float32 through kernels::cpu::gemm, in GFLOP/s;
//   BM_GemmShape/M/N/K/TA/TB  the same at the products of W1, W2 and a
//            Llama's linears (forward y = x W^T, backward dx = dy W and
//            dW = dy^T x; W2's as GPT-2's affine stores W: y = x W, dx =
//            dy W^T, dW = x^T dy; TA, TB: 1 for a transposed operand), the library
//            as REMAT_GEMM chose (docs/gemm.md; bench/gemm_candidates.py);
//   BM_GemmHeads/M/N/K/TA/TB  96 per-head products through gemm_batched;
//   BM_Add   ops add of two 4M-element float32 tensors, in GB/s moved;
//   BM_Relu  ops relu of one 4M-element float32 tensor, in GB/s moved;
//   BM_Gelu  the same for GELU (tanh form);
//   BM_Attention* the steps of W2's attention on its shapes (batch 16,
//            4 heads, 128 tokens, head size 64), q and k read as views into a
//            (16, 128, 768) qkv as the model reads them: the scores GEMMs
//            (scaled by 1/8 as GEMM's alpha), the causal mask and softmax,
//            which a replay of the probabilities runs in that order, and
//            causal_softmax, the two in one op, which GPT runs.
//   BM_AttentionW2<fused> W2's attention whole (batch 8, 12 heads, 128
//            tokens, head size 64, causal) on a (8, 128, 2304) qkv, as
//            nn/gpt.cpp runs it: the fused op on qkv itself (attention_qkv)
//            or the explicit path on views into it (matmul,
//            causal_softmax, matmul), forward alone (/0) or
//            forward and backward (/1); GFLOP/s of the causal scores'
//            products (backward counted as 2.5 forwards), and the bytes
//            held after forward (saved for backward, with the output) and
//            at the peak of the step.
//   BM_RmsNorm, BM_Rotary, BM_Swiglu  Llama's ops at W4-like sizes (B 8,
//            T 256): rms_norm over C 384, rotary on q (8, 6, 256, 64),
//            swiglu of two (8, 256, 1024); forward, in GB/s moved.
//   BM_LayerNormBackward/ROWS/C  kernels::cpu::layer_norm_backward alone
//            (dx, dweight, dbias) on W2's rows (2048, 256) and GPT-2
//            small's at batch 8 (8192, 768), in GB/s moved; real and CPU
//            time (compare CPU time on a loaded machine).
// Threads: REMAT_THREADS (default 1), for OpenMP loops and GEMM alike.
//   REMAT_THREADS=2 build/bench/bench_kernels --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/factory.h"
#include "kernels/cpu/gemm_library.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/parallel.h"
#include "ops/attention.h"
#include "ops/binary.h"
#include "ops/mask.h"
#include "ops/matmul.h"
#include "ops/rms_norm.h"
#include "ops/rotary.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "ops/swiglu.h"
#include "ops/unary.h"

namespace remat {
namespace {

constexpr int64_t kGemmSize = 1024;
constexpr int64_t kElements = int64_t{4} << 20;  // 4M elements, 16 MiB per float32 tensor

// Applies REMAT_THREADS and labels the result with it.
int use_threads(benchmark::State& state) {
  const char* env = std::getenv("REMAT_THREADS");
  const int threads = env && *env ? std::atoi(env) : 1;
  kernels::cpu::set_num_threads(threads > 0 ? threads : 1);
  state.SetLabel("threads=" + std::to_string(kernels::cpu::num_threads()) + "; gemm: " + kernels::cpu::gemm_summary());
  return threads;
}

// A rate counter in units of 1e9 per second: "GFLOP/s=150/s" reads 150 GFLOP/s.
benchmark::Counter giga_per_second(double per_iteration) {
  return benchmark::Counter(per_iteration * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Gemm(benchmark::State& state) {
  use_threads(state);
  const int64_t n = kGemmSize;
  const Tensor a = uniform({n, n}, -1.0, 1.0);  // (n, n)
  const Tensor b = uniform({n, n}, -1.0, 1.0);  // (n, n)
  const Tensor c = zeros({n, n});               // (n, n)
  for (auto _ : state) {
    kernels::cpu::gemm<float>(false, false, n, n, n, 1.0f, a.data<float>(), n, b.data<float>(), n, 0.0f,
                              c.data<float>(), n);
    benchmark::DoNotOptimize(c.data<float>());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = giga_per_second(2.0 * n * n * n);  // one multiply-add is 2 FLOPs
}

// Row-major op(A) (M, K) by op(B) (K, N), each stored as one tensor
// (64-byte aligned, as remat's allocator gives every buffer).
void BM_GemmShape(benchmark::State& state) {
  use_threads(state);
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
  const Tensor a = uniform(ta ? Shape{k, m} : Shape{m, k}, -1.0, 1.0);  // (M, K) or (K, M)
  const Tensor b = uniform(tb ? Shape{n, k} : Shape{k, n}, -1.0, 1.0);  // (K, N) or (N, K)
  const Tensor c = zeros({m, n});                                       // (M, N)
  auto once = [&] {
    kernels::cpu::gemm<float>(ta, tb, m, n, k, 1.0f, a.data<float>(), ta ? m : k, b.data<float>(), tb ? k : n, 0.0f,
                              c.data<float>(), n);
  };
  once();  // untimed: oneDNN generates a kernel the first time a shape needs it
  for (auto _ : state) {
    once();
    benchmark::DoNotOptimize(c.data<float>());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = giga_per_second(2.0 * m * n * k);
}

// The linear layers' three products for x (rows, in) and W (out, in).
void linear_shapes(benchmark::internal::Benchmark* b, int64_t rows, int64_t in, int64_t out) {
  b->Args({rows, out, in, 0, 1});   // y = x W^T
  b->Args({rows, in, out, 0, 0});   // dx = dy W
  b->Args({out, in, rows, 1, 0});   // dW = dy^T x
}

// The same for affine's W (in, out), GPT-2's layout: y = x W, dx = dy W^T,
// dW = x^T dy.
void affine_shapes(benchmark::internal::Benchmark* b, int64_t rows, int64_t in, int64_t out) {
  b->Args({rows, out, in, 0, 0});   // y = x W
  b->Args({rows, in, out, 0, 1});   // dx = dy W^T
  b->Args({in, out, rows, 1, 0});   // dW = x^T dy
}

void gemm_shapes(benchmark::internal::Benchmark* b) {
  // W2 (d_model 256, 16 x 128 tokens): c_attn, attention's c_proj, c_fc, the MLP's c_proj.
  affine_shapes(b, 2048, 256, 768);
  affine_shapes(b, 2048, 256, 256);
  affine_shapes(b, 2048, 256, 1024);
  affine_shapes(b, 2048, 1024, 256);
  // A 768-wide GPT block at 1024 tokens (qkv, proj, fc, fc's proj): the tables of docs/gemm.md.
  for (const int64_t out : {2304, 768, 3072}) linear_shapes(b, 1024, 768, out);
  linear_shapes(b, 1024, 3072, 768);
  linear_shapes(b, 256, 1024, 1024);                                              // W1
  linear_shapes(b, 2048, 384, 1024);                                              // Llama d=384: SwiGLU up
  linear_shapes(b, 2048, 1024, 384);                                              // and down
  linear_shapes(b, 2048, 2048, 8192);                                             // a 1B Llama's up
}

// 96 (batch x heads) per-head products of attention, as matmul runs them.
void BM_GemmHeads(benchmark::State& state) {
  use_threads(state);
  constexpr int64_t kHeads = 96;
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
  const Tensor a = uniform({kHeads, m * k}, -1.0, 1.0);  // (heads, M, K) or (heads, K, M)
  const Tensor b = uniform({kHeads, k * n}, -1.0, 1.0);  // (heads, K, N) or (heads, N, K)
  const Tensor c = zeros({kHeads, m * n});               // (heads, M, N)
  auto once = [&] {
    kernels::cpu::gemm_batched<float>(ta, tb, m, n, k, 1.0f, a.data<float>(), {m * k}, ta ? m : k, b.data<float>(),
                                      {k * n}, tb ? k : n, c.data<float>(), {kHeads});
  };
  once();  // untimed, as above
  for (auto _ : state) {
    once();
    benchmark::DoNotOptimize(c.data<float>());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = giga_per_second(2.0 * kHeads * m * n * k);
}

void BM_Add(benchmark::State& state) {
  use_threads(state);
  const Tensor a = uniform({kElements}, -1.0, 1.0);
  const Tensor b = uniform({kElements}, -1.0, 1.0);
  for (auto _ : state) {
    Tensor c = add(a, b);  // allocates its output each time, as a step would
    benchmark::DoNotOptimize(c.raw_data());
  }
  const double bytes = 3.0 * 4.0 * kElements;  // read a, read b, write c
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["GB/s"] = giga_per_second(bytes);
}

// An elementwise op on kElements floats drawn from [low, high].
template <Tensor (*Op)(const Tensor&)>
void unary_benchmark(benchmark::State& state, double low, double high) {
  use_threads(state);
  const Tensor x = uniform({kElements}, low, high);
  for (auto _ : state) {
    Tensor y = Op(x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  const double bytes = 2.0 * 4.0 * kElements;  // read x, write y
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["GB/s"] = giga_per_second(bytes);
}

void BM_Relu(benchmark::State& state) { unary_benchmark<relu>(state, -1.0, 1.0); }
// GELU (tanh form), the costliest elementwise replay of a GPT block.
void BM_Gelu(benchmark::State& state) { unary_benchmark<gelu>(state, -3.0, 3.0); }

// A forward op on float32 inputs; `bytes` it reads and writes per call.
template <class Op>
void llama_benchmark(benchmark::State& state, Op op, double bytes) {
  use_threads(state);
  for (auto _ : state) {
    Tensor y = op();
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["GB/s"] = giga_per_second(bytes);
}

void BM_RmsNorm(benchmark::State& state) {
  const Tensor x = uniform({8, 256, 384}, -2.0, 2.0), w = uniform({384}, 0.5, 1.5);  // (B, T, C), (C)
  llama_benchmark(state, [&] { return rms_norm(x, w); }, 2.0 * 4.0 * static_cast<double>(x.numel()));  // x, y
}

void BM_Rotary(benchmark::State& state) {
  const Tensor q = uniform({8, 6, 256, 64}, -1.0, 1.0);  // (B, H, T, D)
  llama_benchmark(state, [&] { return rotary(q); }, 2.0 * 4.0 * static_cast<double>(q.numel()));  // q, y
}

void BM_Swiglu(benchmark::State& state) {
  const Tensor gate = uniform({8, 256, 1024}, -4.0, 4.0), up = uniform({8, 256, 1024}, -1.0, 1.0);
  llama_benchmark(state, [&] { return swiglu(gate, up); }, 3.0 * 4.0 * static_cast<double>(gate.numel()));
}

// layer_norm's fused backward on (rows, C) float32, with the statistics
// its forward wrote; every output wanted, as in a GPT block.
void BM_LayerNormBackward(benchmark::State& state) {
  use_threads(state);
  const int64_t rows = state.range(0), c = state.range(1);
  const Tensor x = uniform({rows, c}, -2.0, 2.0), dout = uniform({rows, c}, -1.0, 1.0);  // (rows, C)
  const Tensor weight = uniform({c}, 0.5, 1.5), bias = uniform({c}, -1.0, 1.0);          // (C)
  std::vector<float> y(static_cast<size_t>(rows * c)), dx(y.size()), mean(static_cast<size_t>(rows)),
      rstd(mean.size()), dweight(static_cast<size_t>(c)), dbias(dweight.size());
  kernels::cpu::layer_norm_forward<float>(y.data(), mean.data(), rstd.data(), x.data<float>(), weight.data<float>(),
                                          bias.data<float>(), rows, c, 1e-5);
  const int64_t blocks = kernels::cpu::layer_norm_backward_blocks(rows, c);
  std::vector<float> scratch(static_cast<size_t>(kernels::cpu::layer_norm_backward_scratch(blocks, c)));
  for (auto _ : state) {
    kernels::cpu::layer_norm_backward<float>(dx.data(), dweight.data(), dbias.data(), scratch.data(),
                                             dout.data<float>(), x.data<float>(), weight.data<float>(), mean.data(),
                                             rstd.data(), rows, c, blocks);
    benchmark::DoNotOptimize(dx.data());
    benchmark::ClobberMemory();
  }
  const double bytes = 3.0 * 4.0 * static_cast<double>(rows * c);  // read x and dout, write dx
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["GB/s"] = giga_per_second(bytes);
}

// W2's attention shapes: (B, H, T, D) heads, (B, H, T, T) scores.
constexpr int64_t kB = 16, kH = 4, kT = 128, kD = 64;

// Head `part` (0 q, 1 k, 2 v) of a (B, T, 3 H D) qkv as a (B, H, T, D) view.
Tensor heads(const Tensor& qkv, int64_t part) {
  const int64_t c = kH * kD;
  return transpose(view(slice(qkv, 2, part * c, (part + 1) * c), {kB, kT, kH, kD}), 1, 2);
}

// One (B, H, T, T) step; `bytes` it reads and writes per call, for GB/s.
template <class Step>
void attention_benchmark(benchmark::State& state, Step step, double bytes) {
  use_threads(state);
  for (auto _ : state) {
    Tensor y = step();
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["GB/s"] = giga_per_second(bytes);
}

constexpr double kScoreBytes = 4.0 * kB * kH * kT * kT;

void BM_AttentionScores(benchmark::State& state) {
  const Tensor qkv = uniform({kB, kT, 3 * kH * kD}, -1.0, 1.0);
  const Tensor q = heads(qkv, 0), k = heads(qkv, 1);
  attention_benchmark(state, [&] { return matmul(q, transpose(k, -2, -1), 0.125); }, kScoreBytes);
  state.counters["GFLOP/s"] = giga_per_second(2.0 * kB * kH * kT * kT * kD);
}

void BM_AttentionMask(benchmark::State& state) {
  const Tensor scores = uniform({kB, kH, kT, kT}, -1.0, 1.0);
  const Tensor mask = causal_mask(kT);
  attention_benchmark(state, [&] { return masked_fill(scores, mask, -INFINITY); }, 2 * kScoreBytes);
}

void BM_AttentionSoftmax(benchmark::State& state) {
  const Tensor scores = masked_fill(uniform({kB, kH, kT, kT}, -1.0, 1.0), causal_mask(kT), -INFINITY);
  attention_benchmark(state, [&] { return softmax(scores, -1); }, 2 * kScoreBytes);
}

void BM_AttentionCausalSoftmax(benchmark::State& state) {
  const Tensor scores = uniform({kB, kH, kT, kT}, -1.0, 1.0);
  attention_benchmark(state, [&] { return causal_softmax(scores); }, 2 * kScoreBytes);
}

// W2's attention: (B, H, T, D) heads of a (B, T, 3 H D) qkv.
constexpr int64_t kW2B = 8, kW2H = 12;

template <bool Fused>
void BM_AttentionW2(benchmark::State& state) {
  use_threads(state);
  const bool with_backward = state.range(0) == 1;
  const int64_t c = kW2H * kD;
  Tensor qkv = uniform({kW2B, kT, 3 * c}, -1.0, 1.0);
  qkv.requires_grad_();
  const Tensor dout = uniform({kW2B, kT, kW2H * kD}, -1.0, 1.0);  // (B, T, H D)
  const auto part = [&](int64_t i) {
    return transpose(view(slice(qkv, 2, i * c, (i + 1) * c), {kW2B, kT, kW2H, kD}), 1, 2);
  };
  double held = 0, peak = 0;
  for (auto _ : state) {
    const int64_t before = cpu_allocator().stats().live_transient;
    const ScopedPeak scope;
    Tensor out;
    if constexpr (Fused) {
      out = attention_qkv(qkv, kW2H, kW2H);  // (B, T, H D)
    } else {
      const Tensor q = part(0), k = part(1), v = part(2);
      const Tensor y = matmul(causal_softmax(matmul(q, transpose(k, -2, -1), 0.125)), v);  // (B, H, T, D)
      out = reshape(transpose(y, 1, 2), {kW2B, kT, kW2H * kD});                           // (B, T, H D)
    }
    held = static_cast<double>(cpu_allocator().stats().live_transient - before);
    if (with_backward) {
      out.backward(dout);
      qkv.set_grad(Tensor());
    }
    benchmark::DoNotOptimize(out.raw_data());
    peak = static_cast<double>(scope.stats().peak_transient - before);
  }
  const double forward_flops = 4.0 * kW2B * kW2H * (kT * (kT + 1) / 2) * kD;  // q k^T and P v, causal
  state.counters["GFLOP/s"] = giga_per_second(forward_flops * (with_backward ? 3.5 : 1.0));
  state.counters["held_MB"] = held / 1e6;
  state.counters["peak_MB"] = peak / 1e6;
}

BENCHMARK(BM_Gemm)->Unit(benchmark::kMillisecond)->UseRealTime();
// Their cpu_time is the process's (every thread's): on a machine other
// programs share, GFLOP/s per CPU-second says what the library does with the
// time it gets (bench/gemm_candidates.py reports both).
BENCHMARK(BM_GemmShape)->Apply(gemm_shapes)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_GemmHeads)->Args({128, 128, 64, 0, 1})->Args({128, 64, 128, 0, 0})->Unit(benchmark::kMillisecond)
    ->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(BM_Add)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Relu)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gelu)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RmsNorm)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Rotary)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Swiglu)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_LayerNormBackward)->Args({2048, 256})->Args({8192, 768})->Unit(benchmark::kMicrosecond)->UseRealTime()
    ->MeasureProcessCPUTime();
BENCHMARK(BM_AttentionScores)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionMask)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionSoftmax)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionCausalSoftmax)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionW2<true>)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AttentionW2<false>)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace remat
