// attention (ops/attention.cpp) and its fused CPU kernels
// (kernels/cpu/flash_attention.cpp): a hand case; output and every gradient
// against the explicit matmul + softmax + matmul in float64 and float32
// (causal and full, MHA/GQA/MQA, T across block edges, several D, scales);
// strided views of a projection, and the projection itself (attention_qkv);
// float64 finite differences; bits across
// thread counts, runs and replays; FLOPs; and the errors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/meta.h"
#include "kernels/cpu/parallel.h"
#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/gradcheck.h"
#include "tests/support/replay_counter.h"

namespace remat {
namespace {

using kernels::cpu::NumThreadsGuard;
using testing::contains;
using testing::error_of;
using testing::random_leaf;

// k or v (B, Hkv, S, D) with each head repeated for its Hq / Hkv query heads: (B, Hq, S, D).
Tensor repeat_kv(const Tensor& x, int64_t heads) {
  const int64_t b = x.size(0), kv_heads = x.size(1), s = x.size(2), d = x.size(3);
  const Tensor grouped = expand(reshape(x, {b, kv_heads, 1, s, d}), {b, kv_heads, heads / kv_heads, s, d});
  return reshape(grouped, {b, heads, s, d});
}

// The explicit path: scores (B, Hq, Tq, Tk), their softmax, times v.
Tensor reference_attention(const Tensor& q, const Tensor& k, const Tensor& v, AttentionOptions options) {
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(3))));
  const Tensor scores = matmul(q, transpose(repeat_kv(k, q.size(1)), -2, -1), scale);
  const Tensor p = options.causal ? causal_softmax(scores) : softmax(scores, -1);
  return matmul(p, repeat_kv(v, q.size(1)));
}

struct FlashCase {
  int64_t batch, heads, kv_heads, len, dim;
  bool causal;
  std::optional<double> scale;
  std::string str() const {
    return "B " + std::to_string(batch) + " Hq " + std::to_string(heads) + " Hkv " + std::to_string(kv_heads) +
           " T " + std::to_string(len) + " D " + std::to_string(dim) + (causal ? " causal" : " full") +
           (scale ? " scale " + std::to_string(*scale) : " default scale");
  }
};

// Output and gradients of a forward f(q, k, v) under weights w: out, dq, dk, dv.
Tensors run_attention_fn(const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& f, const Tensors& qkv,
            const Tensor& w) {
  Tensors leaves;
  for (const Tensor& t : qkv) leaves.push_back(t.detach().requires_grad_());
  const Tensor out = f(leaves[0], leaves[1], leaves[2]);
  sum(out * w).backward();
  return {out.detach(), leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
}

// The largest |a - e| / max(1, |e|) over the elements.
double error(const Tensor& a, const Tensor& e) {
  EXPECT_EQ(a.shape(), e.shape());
  const std::vector<double> x = a.to_vector<double>(), y = e.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]) / std::max(1.0, std::abs(y[i])));
  return worst;
}

// The fused op in `dtype` against the explicit path in float64 on the same
// (rounded) inputs: output, dq, dk, dv.
void expect_flash_matches_reference(const FlashCase& c, DType dtype, double tol, uint64_t seed) {
  SCOPED_TRACE(c.str() + (dtype == DType::Float32 ? " float32" : " float64"));
  Generator g(seed);
  const Shape q_shape{c.batch, c.heads, c.len, c.dim}, kv_shape{c.batch, c.kv_heads, c.len, c.dim};
  const Tensors in{normal(q_shape, 0, 1, dtype, g), normal(kv_shape, 0, 1, dtype, g), normal(kv_shape, 0, 1, dtype, g)};
  const Tensor w = normal(q_shape, 0, 1, dtype, g);
  const AttentionOptions options{.causal = c.causal, .scale = c.scale};
  const Tensors fused = run_attention_fn([&](const Tensor& q, const Tensor& k, const Tensor& v) { return attention(q, k, v, options); },
                            in, w);
  Tensors in64;
  for (const Tensor& t : in) in64.push_back(to_dtype(t, DType::Float64));
  const Tensors expected = run_attention_fn([&](const Tensor& q, const Tensor& k, const Tensor& v) {
    return reference_attention(q, k, v, options);
  }, in64, to_dtype(w, DType::Float64));
  const char* names[] = {"out", "dq", "dk", "dv"};
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(fused[i].defined()) << names[i];
    EXPECT_EQ(fused[i].dtype(), dtype) << names[i];
    EXPECT_LT(error(fused[i], expected[i]), tol) << names[i];
  }
}

TEST(Attention, HandComputed) {
  // T = 2, D = 1, scale 1, causal. Row 0 sees key 0 alone: out = v0 = 1.
  // Row 1: scores (1 * 0, 1 * log 3), weights (1/4, 3/4): out = 1/4 + 3/4 * 5 = 4.
  const Tensor q = from_vector(std::vector<double>{1, 1}, {1, 1, 2, 1});
  const Tensor k = from_vector(std::vector<double>{0, std::log(3.0)}, {1, 1, 2, 1});
  const Tensor v = from_vector(std::vector<double>{1, 5}, {1, 1, 2, 1});
  const std::vector<double> causal = attention(q, k, v, {.scale = 1.0}).to_vector<double>();
  EXPECT_NEAR(causal[0], 1.0, 1e-15);
  EXPECT_NEAR(causal[1], 4.0, 1e-15);
  // Full: row 0 also sees key 1, with the same weights as row 1.
  const std::vector<double> full = attention(q, k, v, {.causal = false, .scale = 1.0}).to_vector<double>();
  EXPECT_NEAR(full[0], 4.0, 1e-15);
  EXPECT_NEAR(full[1], 4.0, 1e-15);
}

// Every combination: T on both sides of the 64-row blocks, D not a power of
// two, MHA, GQA and MQA, both masks, the default scale and another.
TEST(Attention, MatchesTheExplicitPath) {
  uint64_t seed = 100;
  for (const int64_t len : {1, 7, 65, 130}) {
    for (const int64_t dim : {16, 64, 80}) {
      for (const int64_t kv_heads : {4, 2, 1}) {
        for (const bool causal : {true, false}) {
          const std::optional<double> scale = (len + dim) % 2 ? std::optional<double>(0.3) : std::nullopt;
          const FlashCase c{.batch = 2, .heads = 4, .kv_heads = kv_heads, .len = len, .dim = dim, .causal = causal,
                       .scale = scale};
          expect_flash_matches_reference(c, DType::Float64, 1e-12, ++seed);
          // float32: the explicit path in float32 is off by up to 9e-6 here;
          // the fused one by up to 1.4e-5 (P = exp(s - lse) with lse rounded
          // to float32, and rowsum(dout * out) in place of the explicit sum).
          expect_flash_matches_reference(c, DType::Float32, 2e-5, ++seed);
        }
      }
    }
  }
}

TEST(Attention, BothScalesAtOneShape) {
  for (const std::optional<double> scale : {std::optional<double>(), std::optional<double>(0.05)}) {
    expect_flash_matches_reference({2, 6, 3, 70, 16, true, scale}, DType::Float64, 1e-12, 7);
  }
}

TEST(Attention, FullAttentionWithMoreKeysThanQueries) {
  Generator g(9);
  const Tensors in{normal({2, 4, 9, 16}, 0, 1, DType::Float64, g), normal({2, 2, 70, 16}, 0, 1, DType::Float64, g),
                   normal({2, 2, 70, 16}, 0, 1, DType::Float64, g)};
  const Tensor w = normal({2, 4, 9, 16}, 0, 1, DType::Float64, g);
  const AttentionOptions options{.causal = false};
  const Tensors fused = run_attention_fn([&](auto& q, auto& k, auto& v) { return attention(q, k, v, options); }, in, w);
  const Tensors expected = run_attention_fn([&](auto& q, auto& k, auto& v) { return reference_attention(q, k, v, options); }, in, w);
  for (size_t i = 0; i < 4; ++i) EXPECT_LT(error(fused[i], expected[i]), 1e-12) << "output/gradient " << i;
}

// q, k, v as GPT makes them: slices of one (B, T, (Hq + 2 Hkv) D) projection,
// viewed (B, T, H, D) and transposed to (B, H, T, D). The gradient reaches
// the projection through the views.
TEST(Attention, ReadsTransposedViewsOfAProjection) {
  for (const DType dtype : {DType::Float64, DType::Float32}) {
    const int64_t b = 2, t = 70, heads = 4, kv_heads = 2, d = 16;
    const int64_t width = (heads + 2 * kv_heads) * d;
    Generator g(11);
    const Tensor proj0 = normal({b, t, width}, 0, 1, dtype, g), w = normal({b, heads, t, d}, 0, 1, dtype, g);
    const auto split = [&](const Tensor& proj, int64_t first, int64_t count) {
      return transpose(view(slice(proj, 2, first * d, (first + count) * d), {b, t, count, d}), 1, 2);
    };
    const auto dproj = [&](bool fused) {
      const Tensor proj = proj0.detach().requires_grad_();
      const Tensor q = split(proj, 0, heads), k = split(proj, heads, kv_heads), v = split(proj, heads + kv_heads, kv_heads);
      EXPECT_FALSE(q.is_contiguous());
      const int64_t before = cpu_allocator().stats().live_transient;
      const ScopedPeak peak;
      const Tensor out = fused ? attention(q, k, v) : reference_attention(q, k, v, {});
      if (fused) {  // the output and the log-sum-exp at most: no copy of q, k or v, even for a while
        EXPECT_EQ(peak.stats().peak_transient - before,
                  (out.numel() + b * heads * t) * static_cast<int64_t>(dtype_size(dtype)));
      }
      sum(out * w).backward();
      return Tensors{out.detach(), proj.grad()};
    };
    const Tensors fused = dproj(true), expected = dproj(false);
    const double tol = dtype == DType::Float64 ? 1e-12 : 2e-5;
    EXPECT_LT(error(fused[0], expected[0]), tol) << "out";
    EXPECT_LT(error(fused[1], expected[1]), tol) << "dproj";
  }
}

// attention_qkv on the projection itself: the output and the projection's
// gradient bit for bit those of attention() on its views (the same kernels
// in the same order), as (B, T, Hq D); the gradient written whole by one
// node, at 1 and 2 threads; and a replay of it gives the kept bits.
TEST(Attention, PackedProjectionGivesTheViewsBits) {
  for (const int threads : {1, 2}) {
    for (const bool causal : {true, false}) {
      const NumThreadsGuard guard(threads);
      SCOPED_TRACE(std::to_string(threads) + " threads" + (causal ? " causal" : " full"));
      const int64_t b = 2, t = 70, heads = 4, kv_heads = 2, d = 16, width = (heads + 2 * kv_heads) * d;
      Generator g(12);
      const Tensor proj0 = normal({b, t, width}, 0, 1, DType::Float32, g);
      const Tensor w = normal({b, t, heads * d}, 0, 1, DType::Float32, g);
      const auto split = [&](const Tensor& proj, int64_t first, int64_t count) {
        return transpose(view(slice(proj, 2, first * d, (first + count) * d), {b, t, count, d}), 1, 2);
      };
      // The output (kept runs only: a replayed one is let go) and the projection's gradient.
      const auto run_once = [&](bool packed, bool recompute) {
        const Tensor proj = proj0.detach().requires_grad_();
        const auto counter = std::make_shared<ReplayCounter>();
        Tensor kept, loss;
        {
          RecomputeScope scope([&](const Node& node) {
            return recompute && node.name() == "attention" ? Tag::Recompute : Tag::Keep;
          });
          GraphObserverScope observing(counter);
          Tensor out;
          if (packed) {
            out = attention_qkv(proj, heads, kv_heads, {.causal = causal});
            EXPECT_EQ(out.grad_fn()->next_edges().size(), 1u);  // one input: the projection
          } else {
            const Tensor q = split(proj, 0, heads), k = split(proj, heads, kv_heads),
                         v = split(proj, heads + kv_heads, kv_heads);
            out = reshape(attention(q, k, v, {.causal = causal, .tokens_first = true}), {b, t, heads * d});
          }
          if (!recompute) kept = out.detach();
          loss = sum(out * out * w);
        }
        loss.backward();
        EXPECT_EQ(counter->nodes > 0, recompute) << counter->nodes << " replays";
        return Tensors{kept, proj.grad()};
      };
      const Tensors views = run_once(false, false), packed = run_once(true, false), replayed = run_once(true, true);
      EXPECT_EQ(packed[0].shape(), (Shape{b, t, heads * d}));
      EXPECT_EQ(packed[0].to_vector<float>(), views[0].to_vector<float>()) << "output";
      EXPECT_EQ(packed[1].to_vector<float>(), views[1].to_vector<float>()) << "the projection's gradient";
      EXPECT_EQ(replayed[1].to_vector<float>(), packed[1].to_vector<float>()) << "replayed against kept";
    }
  }
}

TEST(Attention, PackedProjectionGradients) {
  // GQA (4 query heads, 2 kv heads) across a block edge, and MHA with a scale.
  EXPECT_GRADIENTS_MATCH([&](const Tensors& x) { return attention_qkv(x[0], 4, 2); },
                         (Tensors{random_leaf({1, 67, 8 * 2}, -1, 1, 7)}));
  EXPECT_GRADIENTS_MATCH([&](const Tensors& x) { return attention_qkv(x[0], 2, 2, {.causal = false, .scale = 0.6}); },
                         (Tensors{random_leaf({2, 5, 6 * 3}, -1, 1, 8)}));
}

TEST(Attention, PackedProjectionErrorsNameTheShapes) {
  std::string e = error_of([&] { attention_qkv(zeros({2, 8, 4, 16}), 4, 4); });
  EXPECT_TRUE(contains(e, "(B, T, (Hq + 2 Hkv) D)") && contains(e, "(2, 8, 4, 16)")) << e;
  e = error_of([&] { attention_qkv(zeros({2, 8, 100}), 4, 4); });
  EXPECT_TRUE(contains(e, "last axis 100 is not 12 heads") && contains(e, "(2, 8, 100)")) << e;
  e = error_of([&] { attention_qkv(zeros({2, 8, 96}), 4, 3); });
  EXPECT_TRUE(contains(e, "kv heads (3) must divide the query heads (4)") && contains(e, "(2, 8, 96)")) << e;
  e = error_of([&] { attention_qkv(zeros({2, 8, 96}, DType::Int64), 4, 4); });
  EXPECT_TRUE(contains(e, "float32 or float64") && contains(e, "int64")) << e;
  e = error_of([&] { attention_qkv(zeros({2, 0, 96}), 4, 4); });
  EXPECT_TRUE(contains(e, "no tokens") && contains(e, "(2, 0, 96)")) << e;
}

TEST(Attention, ReadsOtherStridesThroughACopy) {
  // The head size is not contiguous here (a transpose of the last two axes).
  Generator g(13);
  const Tensor q0 = normal({1, 2, 16, 9}, 0, 1, DType::Float64, g), k0 = normal({1, 2, 16, 9}, 0, 1, DType::Float64, g);
  const Tensor v = normal({1, 2, 9, 16}, 0, 1, DType::Float64, g);
  const Tensor q = transpose(q0, 2, 3), k = transpose(k0, 2, 3);  // (1, 2, 9, 16), strided
  EXPECT_LT(error(attention(q, k, v), reference_attention(q, k, v, {})), 1e-12);
}

TEST(Attention, Gradients) {
  for (const bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    EXPECT_GRADIENTS_MATCH([&](const Tensors& x) { return attention(x[0], x[1], x[2], {.causal = causal}); },
                           (Tensors{random_leaf({2, 2, 5, 3}, -1, 1, 1), random_leaf({2, 1, 5, 3}, -1, 1, 2),
                                    random_leaf({2, 1, 5, 3}, -1, 1, 3)}));
    // Across a block edge (64 rows), with two kv heads for four query heads.
    EXPECT_GRADIENTS_MATCH([&](const Tensors& x) {
      return attention(x[0], x[1], x[2], {.causal = causal, .scale = 0.7});
    }, (Tensors{random_leaf({1, 4, 67, 2}, -1, 1, 4), random_leaf({1, 2, 67, 2}, -1, 1, 5),
                random_leaf({1, 2, 67, 2}, -1, 1, 6)}));
  }
}

// Out, dq, dk, dv of one float32 call, in bits.
std::vector<std::vector<uint32_t>> bits_of(const Shape& q_shape, const Shape& kv_shape, bool causal) {
  Generator g(21);
  const Tensors in{normal(q_shape, 0, 1, DType::Float32, g), normal(kv_shape, 0, 1, DType::Float32, g),
                   normal(kv_shape, 0, 1, DType::Float32, g)};
  const Tensor w = normal(q_shape, 0, 1, DType::Float32, g);
  const Tensors r = run_attention_fn([&](auto& q, auto& k, auto& v) { return attention(q, k, v, {.causal = causal}); }, in, w);
  std::vector<std::vector<uint32_t>> bits;
  for (const Tensor& t : r) {
    std::vector<uint32_t> b;
    for (const float x : t.to_vector<float>()) b.push_back(std::bit_cast<uint32_t>(x));
    bits.push_back(b);
  }
  return bits;
}

// Bits equal with 1 and 2 threads, and run to run. MHA at B Hkv = 16 runs
// backward's one-pass schedule on both counts; MQA at B = 1 the two-pass
// one on two threads and the one-pass one on one, which must agree too.
TEST(Attention, BitsDoNotDependOnTheThreads) {
  struct Shapes {
    Shape q, kv;
  };
  for (const Shapes& s : {Shapes{{2, 8, 130, 64}, {2, 8, 130, 64}}, Shapes{{1, 4, 130, 24}, {1, 1, 130, 24}}}) {
    for (const bool causal : {true, false}) {
      SCOPED_TRACE(str(s.q) + " " + str(s.kv) + (causal ? " causal" : " full"));
      std::vector<std::vector<uint32_t>> one, two, again;
      {
        const NumThreadsGuard guard(1);
        one = bits_of(s.q, s.kv, causal);
      }
      {
        const NumThreadsGuard guard(2);
        two = bits_of(s.q, s.kv, causal);
        again = bits_of(s.q, s.kv, causal);
      }
      for (size_t i = 0; i < one.size(); ++i) {
        EXPECT_EQ(one[i], two[i]) << "output/gradient " << i << ": 1 thread against 2";
        EXPECT_EQ(two[i], again[i]) << "output/gradient " << i << ": run to run";
      }
    }
  }
}

// The node tagged Recompute: its output goes after forward and is replayed
// for backward (the multiplication after it, and its own backward, read
// it), with a new log-sum-exp: gradients bit-identical to keeping it.
TEST(Attention, AReplayGivesTheGradientsOfKeepingIt) {
  for (const int threads : {1, 2}) {
    const NumThreadsGuard guard(threads);
    Generator g(31);
    const Tensors in{normal({2, 4, 70, 32}, 0, 1, DType::Float32, g), normal({2, 2, 70, 32}, 0, 1, DType::Float32, g),
                     normal({2, 2, 70, 32}, 0, 1, DType::Float32, g)};
    const Tensor w = normal({2, 4, 70, 32}, 0, 1, DType::Float32, g);
    const auto gradients = [&](bool recompute, int64_t* replays) {
      Tensors leaves;
      for (const Tensor& t : in) leaves.push_back(t.detach().requires_grad_());
      const auto counter = std::make_shared<ReplayCounter>();
      Tensor loss;
      {
        RecomputeScope scope([&](const Node& node) {
          return recompute && node.name() == "attention" ? Tag::Recompute : Tag::Keep;
        });
        GraphObserverScope observing(counter);
        const Tensor out = attention(leaves[0], leaves[1], leaves[2]);
        EXPECT_EQ(out.grad_fn()->tag(), recompute ? Tag::Recompute : Tag::Keep);
        loss = sum(out * out * w);
      }
      loss.backward();
      *replays = counter->nodes;
      return Tensors{leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
    };
    int64_t kept_replays = 0, replays = 0;
    const Tensors kept = gradients(false, &kept_replays), replayed = gradients(true, &replays);
    EXPECT_EQ(kept_replays, 0);
    EXPECT_GE(replays, 1) << threads << " threads";
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(kept[i].to_vector<float>(), replayed[i].to_vector<float>()) << "gradient " << i << ", " << threads
                                                                            << " threads";
    }
  }
}

// A step rehearsed on the meta device (the scheduler plans with one):
// shapes and saved bytes, and no kernel run.
TEST(Attention, RehearsesOnTheMetaDevice) {
  const Tensor q = random_leaf({2, 4, 70, 8}), k = random_leaf({2, 2, 70, 8}, -1, 1, 2), v = random_leaf({2, 2, 70, 8});
  const MetaScope meta;
  const Tensor out = attention(transpose(transpose(q, 1, 2), 1, 2), k, v);
  EXPECT_EQ(out.device().type, DeviceType::Meta);
  EXPECT_EQ(out.shape(), (Shape{2, 4, 70, 8}));
  sum(out).backward();
  EXPECT_FALSE(q.grad().defined());  // leaf gradients are not accumulated in a rehearsal
}

TEST(Attention, DeclaresItsFlops) {
  // 4 D FLOPs a score for the two products and 5 for the softmax, over
  // T (T + 1) / 2 scores a head when causal, T S otherwise.
  const Tensor q = random_leaf({2, 4, 10, 8}), kv = random_leaf({2, 2, 10, 8});
  EXPECT_EQ(attention(q, kv, kv).grad_fn()->record().flops, 2 * 4 * 55 * (4 * 8 + 5));
  EXPECT_EQ(attention(q, kv, kv, {.causal = false}).grad_fn()->record().flops, 2 * 4 * 100 * (4 * 8 + 5));
  EXPECT_TRUE(attention(q, kv, kv).grad_fn()->record().compute_bound);
}

TEST(Attention, ErrorsNameTheShapes) {
  const Tensor q = zeros({2, 4, 8, 16}), kv = zeros({2, 2, 8, 16});
  std::string e = error_of([&] { attention(zeros({2, 4, 8}), kv, kv); });
  EXPECT_TRUE(contains(e, "(B, Hq, Tq, D)") && contains(e, "(2, 4, 8)")) << e;
  e = error_of([&] { attention(q, zeros({2, 2, 8, 32}), zeros({2, 2, 8, 32})); });
  EXPECT_TRUE(contains(e, "head size") && contains(e, "16 and 32") && contains(e, "(2, 2, 8, 32)")) << e;
  e = error_of([&] { attention(q, zeros({2, 3, 8, 16}), zeros({2, 3, 8, 16})); });
  EXPECT_TRUE(contains(e, "kv heads (3) must divide the query heads (4)") && contains(e, "(2, 3, 8, 16)")) << e;
  e = error_of([&] { attention(q, zeros({2, 2, 9, 16}), zeros({2, 2, 9, 16})); });
  EXPECT_TRUE(contains(e, "Tq 8 and Tk 9") && contains(e, "(2, 2, 9, 16)")) << e;
  EXPECT_NO_THROW(attention(q, zeros({2, 2, 9, 16}), zeros({2, 2, 9, 16}), {.causal = false}));
  e = error_of([&] { attention(q, zeros({3, 2, 8, 16}), zeros({3, 2, 8, 16})); });
  EXPECT_TRUE(contains(e, "batches 2 and 3") && contains(e, "(3, 2, 8, 16)")) << e;
  e = error_of([&] { attention(q, kv, zeros({2, 2, 8, 8})); });
  EXPECT_TRUE(contains(e, "one shape") && contains(e, "(2, 2, 8, 8)")) << e;
  e = error_of([&] { attention(zeros({2, 4, 8, 16}, DType::Int64), kv, kv); });
  EXPECT_TRUE(contains(e, "float32 or all float64") && contains(e, "int64") && contains(e, "(2, 4, 8, 16)")) << e;
  e = error_of([&] { attention(q, to_dtype(kv, DType::Float64), to_dtype(kv, DType::Float64)); });
  EXPECT_TRUE(contains(e, "float32, float64, float64")) << e;
  e = error_of([&] { attention(zeros({2, 4, 0, 16}), zeros({2, 2, 0, 16}), zeros({2, 2, 0, 16})); });
  EXPECT_TRUE(contains(e, "no keys") && contains(e, "(2, 2, 0, 16)")) << e;
}

}  // namespace
}  // namespace remat
