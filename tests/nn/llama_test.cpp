// Llama (nn/llama.h): Hugging Face's parameter names, shapes and order for
// multi-head, grouped and multi-query configs, tied and untied; HF's
// initialisation; the logits and loss against a float64 reference written
// here with loops (RMSNorm, rotate-half RoPE, GQA causal attention, SwiGLU);
// gradients against finite differences (both MLP paths); node names and
// blocks in HF's module paths; the fused MLP (swiglu_linear) with the bits
// of the explicit one; bits independent of the thread count; every checkpointing
// policy and preset bit-identical to keep-all, and what the presets replay.
#include "nn/llama.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "ops/ops.h"
#include "scheduler/checkpointer.h"
#include "scheduler/plan.h"
#include "tests/support/errors.h"
#include "tests/support/plan_workloads.h"
#include "tests/support/plans.h"

namespace remat::nn {
namespace {

// C 16, H 4 (D 4), Hkv `kv_heads`, I 24, V 13, two layers.
LlamaConfig tiny_gqa_llama(int64_t kv_heads, bool tied, DType dtype = DType::Float64) {
  return {.vocab_size = 13, .hidden_size = 16, .intermediate_size = 24, .num_hidden_layers = 2,
          .num_attention_heads = 4, .num_key_value_heads = kv_heads, .max_position_embeddings = 8,
          .rope_theta = 500.0, .rms_norm_eps = 1e-5, .tie_word_embeddings = tied, .dtype = dtype, .seed = 3};
}

// LlamaForCausalLM's state_dict as its safetensors file holds it: names,
// shapes, order (a tied head left out).
std::vector<std::pair<std::string, Shape>> hf_state_dict(const LlamaConfig& c) {
  const int64_t C = c.hidden_size, D = c.hidden_size / c.num_attention_heads, I = c.intermediate_size;
  const int64_t Hkv = c.num_key_value_heads > 0 ? c.num_key_value_heads : c.num_attention_heads;
  std::vector<std::pair<std::string, Shape>> out{{"model.embed_tokens.weight", {c.vocab_size, C}}};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string layer = "model.layers." + std::to_string(i) + ".";
    out.push_back({layer + "self_attn.q_proj.weight", {c.num_attention_heads * D, C}});
    out.push_back({layer + "self_attn.k_proj.weight", {Hkv * D, C}});
    out.push_back({layer + "self_attn.v_proj.weight", {Hkv * D, C}});
    out.push_back({layer + "self_attn.o_proj.weight", {C, c.num_attention_heads * D}});
    out.push_back({layer + "mlp.gate_proj.weight", {I, C}});
    out.push_back({layer + "mlp.up_proj.weight", {I, C}});
    out.push_back({layer + "mlp.down_proj.weight", {C, I}});
    out.push_back({layer + "input_layernorm.weight", {C}});
    out.push_back({layer + "post_attention_layernorm.weight", {C}});
  }
  out.push_back({"model.norm.weight", {C}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, C}});
  return out;
}

TEST(Llama, ParameterNamesShapesAndOrderAreHuggingFaces) {
  for (const int64_t kv_heads : {4, 2, 1, 0}) {  // MHA, GQA, MQA, 0 = H
    for (const bool tied : {false, true}) {
      SCOPED_TRACE("kv heads " + std::to_string(kv_heads) + (tied ? " tied" : " untied"));
      const LlamaConfig config = tiny_gqa_llama(kv_heads, tied, DType::Float32);
      const Llama model(config);
      std::vector<std::pair<std::string, Shape>> names;
      int64_t count = 0;
      for (const auto& [name, p] : model.named_parameters()) names.push_back({name, p.shape()});
      const auto expected = hf_state_dict(config);
      EXPECT_EQ(names, expected);
      for (const auto& [name, shape] : expected) count += numel(shape);
      EXPECT_EQ(model.num_parameters(), count);
      EXPECT_EQ(model.config().num_key_value_heads, kv_heads == 0 ? 4 : kv_heads);
    }
  }
}

TEST(Llama, InitialisationIsHuggingFaces) {
  const Llama model({.vocab_size = 256, .hidden_size = 128, .intermediate_size = 256, .num_hidden_layers = 1,
                     .num_attention_heads = 4, .num_key_value_heads = 2, .seed = 5});
  for (const auto& [name, p] : model.named_parameters()) {
    const std::vector<float> v = p.to_vector<float>();
    double sum = 0, squares = 0;
    for (float x : v) sum += x, squares += double(x) * x;
    const double mean = sum / v.size(), std = std::sqrt(squares / v.size() - mean * mean);
    if (name.ends_with("norm.weight")) {
      EXPECT_EQ(mean, 1.0) << name;
      EXPECT_EQ(std, 0.0) << name;
    } else {
      EXPECT_NEAR(std, 0.02, 0.002) << name;
      EXPECT_NEAR(mean, 0.0, 0.002) << name;
    }
  }
  // The same seed, the same weights; another seed, others.
  const Llama again({.vocab_size = 256, .hidden_size = 128, .intermediate_size = 256, .num_hidden_layers = 1,
                     .num_attention_heads = 4, .num_key_value_heads = 2, .seed = 5});
  const Llama other({.vocab_size = 256, .hidden_size = 128, .intermediate_size = 256, .num_hidden_layers = 1,
                     .num_attention_heads = 4, .num_key_value_heads = 2, .seed = 6});
  const auto a = model.named_parameters(), b = again.named_parameters(), c = other.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].second.to_vector<float>(), b[i].second.to_vector<float>()) << a[i].first;
    if (!a[i].first.ends_with("norm.weight")) {
      EXPECT_NE(a[i].second.to_vector<float>(), c[i].second.to_vector<float>()) << a[i].first;
    }
  }
}

// Every parameter of a float64 model redrawn N(0, 0.5) (norm weights
// 1 + N(0, 0.5)), so that attention is far from uniform.
void randomise(Llama& model, uint64_t seed) {
  Generator g(seed);
  NoGradGuard no_grad;
  for (const auto& [name, p] : model.named_parameters()) {
    const Tensor values = normal(p.shape(), name.ends_with("norm.weight") ? 1.0 : 0.0, 0.5, DType::Float64, g);
    std::copy_n(values.data<double>(), values.numel(), p.data<double>());
  }
}

// The model by loops in float64, from its named parameters: logits (B, T, V)
// and the mean loss over targets other than -100.
struct Reference {
  std::vector<double> logits;
  double loss = 0;
};

Reference loop_reference(const Llama& model, const std::vector<int64_t>& ids, const std::vector<int64_t>& targets,
                         int64_t B, int64_t T) {
  const LlamaConfig& c = model.config();
  std::map<std::string, std::vector<double>> w;
  for (const auto& [name, p] : model.named_parameters()) w[name] = p.to_vector<double>();
  const int64_t C = c.hidden_size, H = c.num_attention_heads, Hkv = c.num_key_value_heads, D = C / H;
  const int64_t I = c.intermediate_size, V = c.vocab_size;
  using Rows = std::vector<std::vector<double>>;
  // y = W x for W (out, in).
  auto apply = [](const std::vector<double>& W, const std::vector<double>& x, int64_t out) {
    const int64_t in = static_cast<int64_t>(x.size());
    std::vector<double> y(out, 0.0);
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t i = 0; i < in; ++i) y[o] += W[o * in + i] * x[i];
    }
    return y;
  };
  auto rms = [&](const std::vector<double>& x, const std::vector<double>& weight) {
    double squares = 0;
    for (double v : x) squares += v * v;
    const double r = 1.0 / std::sqrt(squares / static_cast<double>(x.size()) + c.rms_norm_eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * weight[i];
    return y;
  };
  // Head `h` of a (heads D) row at position t, rotated: x cos + rotate_half(x) sin.
  auto rope = [&](const std::vector<double>& row, int64_t h, int64_t t) {
    std::vector<double> y(D);
    for (int64_t i = 0; i < D / 2; ++i) {
      const double angle = static_cast<double>(t) * std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / D);
      const double x1 = row[h * D + i], x2 = row[h * D + i + D / 2];
      y[i] = x1 * std::cos(angle) - x2 * std::sin(angle);
      y[i + D / 2] = x2 * std::cos(angle) + x1 * std::sin(angle);
    }
    return y;
  };
  Reference out;
  out.logits.assign(B * T * V, 0.0);
  double total = 0;
  int64_t counted = 0;
  for (int64_t b = 0; b < B; ++b) {
    Rows x(T);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t id = ids[b * T + t];
      const std::vector<double>& table = w["model.embed_tokens.weight"];
      x[t].assign(table.begin() + id * C, table.begin() + (id + 1) * C);
    }
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      Rows q(T), k(T), v(T);
      for (int64_t t = 0; t < T; ++t) {
        const std::vector<double> n = rms(x[t], w[p + "input_layernorm.weight"]);
        q[t] = apply(w[p + "self_attn.q_proj.weight"], n, H * D);
        k[t] = apply(w[p + "self_attn.k_proj.weight"], n, Hkv * D);
        v[t] = apply(w[p + "self_attn.v_proj.weight"], n, Hkv * D);
      }
      Rows attended(T, std::vector<double>(H * D, 0.0));
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / (H / Hkv);  // the kv head of query head h
        for (int64_t t = 0; t < T; ++t) {
          const std::vector<double> qt = rope(q[t], h, t);
          std::vector<double> scores(t + 1);
          double top = -INFINITY;
          for (int64_t u = 0; u <= t; ++u) {
            const std::vector<double> ku = rope(k[u], g, u);
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) dot += qt[d] * ku[d];
            scores[u] = dot / std::sqrt(static_cast<double>(D));
            top = std::max(top, scores[u]);
          }
          double sum = 0;
          for (double& s : scores) sum += (s = std::exp(s - top));
          for (int64_t u = 0; u <= t; ++u) {
            for (int64_t d = 0; d < D; ++d) attended[t][h * D + d] += scores[u] / sum * v[u][g * D + d];
          }
        }
      }
      for (int64_t t = 0; t < T; ++t) {
        const std::vector<double> o = apply(w[p + "self_attn.o_proj.weight"], attended[t], C);
        for (int64_t i = 0; i < C; ++i) x[t][i] += o[i];
        const std::vector<double> m = rms(x[t], w[p + "post_attention_layernorm.weight"]);
        const std::vector<double> gate = apply(w[p + "mlp.gate_proj.weight"], m, I);
        std::vector<double> hidden = apply(w[p + "mlp.up_proj.weight"], m, I);
        for (int64_t i = 0; i < I; ++i) hidden[i] *= gate[i] / (1.0 + std::exp(-gate[i]));  // silu(gate) * up
        const std::vector<double> down = apply(w[p + "mlp.down_proj.weight"], hidden, C);
        for (int64_t i = 0; i < C; ++i) x[t][i] += down[i];
      }
    }
    const std::vector<double>& head = c.tie_word_embeddings ? w["model.embed_tokens.weight"] : w["lm_head.weight"];
    for (int64_t t = 0; t < T; ++t) {
      const std::vector<double> logits = apply(head, rms(x[t], w["model.norm.weight"]), V);
      std::copy(logits.begin(), logits.end(), out.logits.begin() + (b * T + t) * V);
      const int64_t target = targets[b * T + t];
      if (target == -100) continue;
      double top = -INFINITY, sum = 0;
      for (double z : logits) top = std::max(top, z);
      for (double z : logits) sum += std::exp(z - top);
      total += top + std::log(sum) - logits[target];
      ++counted;
    }
  }
  out.loss = total / static_cast<double>(counted);
  return out;
}

TEST(Llama, LogitsAndLossMatchALoopReference) {
  for (const int64_t kv_heads : {4, 2, 1}) {
    for (const bool tied : {false, true}) {
      SCOPED_TRACE("kv heads " + std::to_string(kv_heads) + (tied ? " tied" : " untied"));
      Llama model(tiny_gqa_llama(kv_heads, tied));
      randomise(model, 7 + kv_heads);
      Generator g(4);
      const int64_t B = 2, T = 6;
      const Tensor ids = randint(13, {B, T}, g);
      // HF's labels, with an ignored one: the shifted targets end in -100.
      std::vector<int64_t> labels = ids.to_vector<int64_t>();
      labels[3] = -100;
      const Tensor targets = shift_labels(from_vector(labels, {B, T}));
      const LlamaOutput out = model.forward(ids, targets);
      const Reference expected = loop_reference(model, ids.to_vector<int64_t>(), targets.to_vector<int64_t>(), B, T);
      const std::vector<double> logits = out.logits.to_vector<double>();
      ASSERT_EQ(logits.size(), expected.logits.size());
      double worst = 0;
      for (size_t i = 0; i < logits.size(); ++i) worst = std::max(worst, std::abs(logits[i] - expected.logits[i]));
      EXPECT_LT(worst, 1e-12);
      EXPECT_NEAR(out.loss.item<double>(), expected.loss, 1e-12);
    }
  }
}

TEST(Llama, ShiftLabelsIsHuggingFacesShift) {
  const Tensor labels = from_vector(std::vector<int64_t>{5, 6, 7, -100, 1, 2}, {2, 3});
  EXPECT_EQ(shift_labels(labels).to_vector<int64_t>(), (std::vector<int64_t>{6, 7, -100, 1, 2, -100}));
  EXPECT_EQ(shift_labels(labels).shape(), (Shape{2, 3}));
  EXPECT_THROW(shift_labels(zeros({2, 3})), Error);
}

// A few elements of every parameter (first, last, and between): analytic
// gradient against central differences of the float64 loss.
void check_gradients(int64_t kv_heads, bool tied, bool fused_mlp = true) {
  LlamaConfig config = tiny_gqa_llama(kv_heads, tied);
  config.fused_mlp = fused_mlp;
  Llama model(config);
  randomise(model, 2);
  Generator g(2);
  const Tensor ids = randint(13, {2, 5}, g), targets = randint(13, {2, 5}, g);
  model.forward(ids, targets).loss.backward();
  NoGradGuard no_grad;
  double worst = 0;
  std::string where;
  for (const auto& [name, p] : model.named_parameters()) {
    const std::vector<double> analytic = p.grad().to_vector<double>();
    double* data = p.data<double>();
    for (int64_t j : {int64_t{0}, p.numel() / 3, p.numel() / 2 + 1, p.numel() - 1}) {
      const double saved = data[j];
      data[j] = saved + 1e-6;
      const double up = model.forward(ids, targets).loss.item<double>();
      data[j] = saved - 1e-6;
      const double down = model.forward(ids, targets).loss.item<double>();
      data[j] = saved;
      const double error = std::abs((up - down) / 2e-6 - analytic[j]);
      if (error > worst) worst = error, where = name + "[" + std::to_string(j) + "]";
    }
  }
  EXPECT_LT(worst, 1e-7) << where;
}

TEST(Llama, GradientsMatchFiniteDifferencesGroupedQueryTied) { check_gradients(2, /*tied=*/true); }
TEST(Llama, GradientsMatchFiniteDifferencesMultiQueryUntied) { check_gradients(1, /*tied=*/false); }
TEST(Llama, GradientsMatchFiniteDifferencesMultiHeadUntied) { check_gradients(4, /*tied=*/false); }
TEST(Llama, GradientsMatchFiniteDifferencesExplicitMlp) { check_gradients(2, /*tied=*/false, /*fused_mlp=*/false); }

// The graph of a float32 step under a Checkpointer that keeps all.
scheduler::GraphProfile graph_of(const LlamaConfig& config) {
  const scheduler::plan_testing::Workload step = [config] {
    auto model = std::make_shared<Llama>(config);
    Generator g(1);
    const Tensor ids = randint(config.vocab_size, {2, 6}, g);
    return std::pair{model->forward(ids, ids).loss, model->parameters()};
  };
  return scheduler::plan_testing::run(step, {.policy = "none"}).graph;
}

TEST(Llama, NodesAreNamedByHuggingFacesModulePathsInBlocks) {
  for (const bool tied : {false, true}) {
    const scheduler::GraphProfile graph = graph_of(tiny_gqa_llama(2, tied, DType::Float32));
    std::set<std::string> names, blocks;
    for (const scheduler::NodeProfile& node : graph.nodes) {
      names.insert(node.name);
      blocks.insert(node.block);
    }
    for (const char* name :
         {"model.embed_tokens/embedding", "model.layers.0.input_layernorm/rms_norm",
          "model.layers.0.self_attn.q_proj/linear", "model.layers.0.self_attn.k_proj/linear",
          "model.layers.0.self_attn.v_proj/linear", "model.layers.0.self_attn/rotary",
          "model.layers.0.self_attn/rotary#1", "model.layers.0.self_attn/attention",
          "model.layers.0.self_attn.o_proj/linear", "model.layers.1.post_attention_layernorm/rms_norm",
          "model.layers.1.mlp.gate_proj/linear", "model.layers.1.mlp.up_proj/linear",
          "model.layers.1.mlp.down_proj/swiglu_linear", "model.norm/rms_norm", "lm_head/linear", "/cross_entropy"}) {
      EXPECT_TRUE(names.contains(name)) << name << (tied ? " (tied)" : "");
    }
    EXPECT_EQ(blocks, (std::set<std::string>{"", "model.layers.0", "model.layers.1"}));
  }
  // The explicit MLP: swiglu under the MLP's name, then down_proj's linear.
  LlamaConfig config = tiny_gqa_llama(2, false, DType::Float32);
  config.fused_mlp = false;
  std::set<std::string> names;
  for (const scheduler::NodeProfile& node : graph_of(config).nodes) names.insert(node.name);
  EXPECT_TRUE(names.contains("model.layers.1.mlp/swiglu"));
  EXPECT_TRUE(names.contains("model.layers.1.mlp.down_proj/linear"));
  EXPECT_FALSE(names.contains("model.layers.1.mlp.down_proj/swiglu_linear"));
}

// down_proj(swiglu(gate, up)) as one node against the two: the loss and
// every gradient bit for bit, at 1 and 2 threads.
TEST(Llama, TheFusedMlpHasTheExplicitMlpsBits) {
  auto step = [](bool fused_mlp) {
    Llama model({.vocab_size = 37, .hidden_size = 64, .intermediate_size = 96, .num_hidden_layers = 2,
                 .num_attention_heads = 4, .num_key_value_heads = 2, .seed = 9, .fused_mlp = fused_mlp});
    Generator g(3);
    const Tensor ids = randint(37, {3, 24}, g);
    const Tensor loss = model.forward(ids, shift_labels(ids)).loss;
    loss.backward();
    std::vector<std::vector<float>> out{loss.to_vector<float>()};
    for (const Tensor& p : model.parameters()) out.push_back(p.grad().to_vector<float>());
    return out;
  };
  for (const int threads : {1, 2}) {
    kernels::cpu::NumThreadsGuard guard(threads);
    EXPECT_EQ(step(true), step(false)) << threads << " threads";
  }
}

TEST(Llama, BitsDoNotDependOnTheThreadCount) {
  auto step = [](int threads) {
    kernels::cpu::NumThreadsGuard guard(threads);
    Llama model({.vocab_size = 37, .hidden_size = 64, .intermediate_size = 96, .num_hidden_layers = 2,
                 .num_attention_heads = 4, .num_key_value_heads = 2, .seed = 9});
    Generator g(3);
    const Tensor ids = randint(37, {3, 24}, g);
    const Tensor loss = model.forward(ids, shift_labels(ids)).loss;
    loss.backward();
    std::vector<std::vector<float>> out{loss.to_vector<float>()};
    for (const Tensor& p : model.parameters()) out.push_back(p.grad().to_vector<float>());
    return out;
  };
  EXPECT_EQ(step(1), step(2));
}

TEST(Llama, ConfigurationsItCannotComputeAreErrors) {
  LlamaConfig config = tiny_gqa_llama(3, false);
  EXPECT_TRUE(testing::contains(testing::error_of([&] { Llama model(config); }),
                                "num_key_value_heads 3 does not divide num_attention_heads 4"));
  config = tiny_gqa_llama(2, false);
  config.hidden_size = 12;  // D = 3
  EXPECT_TRUE(testing::contains(testing::error_of([&] { Llama model(config); }), "head_dim 3"));
  config = tiny_gqa_llama(2, false);
  config.hidden_size = 18;
  EXPECT_TRUE(testing::contains(testing::error_of([&] { Llama model(config); }), "hidden_size 18 is not divisible"));
  config = tiny_gqa_llama(2, false);
  config.rms_norm_eps = 0;
  EXPECT_THROW(Llama{config}, Error);
  Llama model(tiny_gqa_llama(2, false));
  EXPECT_THROW(model.forward(zeros({2, 3}, DType::Float64), Tensor()), Error);
  EXPECT_THROW(model.forward(zeros({2, 3}, DType::Int64), zeros({2, 4}, DType::Int64)), Error);
}

}  // namespace

// Checkpointing a Llama: the plan tests' harness (tests/support/plan_workloads.h).
namespace {

using namespace scheduler;
using namespace scheduler::plan_testing;

// A fresh float32 Llama (GQA, untied) and batch per call, the same each time.
Workload llama(int64_t batch = 3) {
  return [batch] {
    auto model = std::make_shared<Llama>(LlamaConfig{.vocab_size = 17, .hidden_size = 32, .intermediate_size = 48,
                                                     .num_hidden_layers = 3, .num_attention_heads = 4,
                                                     .num_key_value_heads = 2, .seed = 6});
    Generator g(2);
    const Tensor ids = as_data([&] { return randint(17, {batch, 12}, g); });
    const Tensor targets = as_data([&] { return shift_labels(ids); });
    return std::pair{model->forward(ids, targets).loss, model->parameters()};
  };
}

TEST(LlamaCheckpointing, EveryPolicyIsBitIdenticalToKeepAll) {
  const Grads expected = reference(llama());
  const Step all = run(llama(), {.policy = "none"});
  const int64_t low = minimum_budget(all.graph), high = all.report.measured_peak_bytes;
  for (const std::string& policy : policy_names()) {
    SCOPED_TRACE(policy);
    if (policy == "dtr") {  // plans nothing: evicts within a budget as it runs
      const Step step = run(llama(), {.policy = "dtr", .budget = (low + high) / 2}, 2);
      EXPECT_EQ(step.grads, expected);
      EXPECT_GT(step.report.replayed_nodes, 0);
      EXPECT_LE(step.report.measured_peak_bytes, (low + high) / 2);
      continue;
    }
    const Step step = run(llama(), testing::options_of(policy));
    EXPECT_EQ(step.grads, expected);
    expect_prediction_holds(step);
    if (policy != "none" && policy != "chain" && policy != "milp") { EXPECT_GT(step.report.replayed_nodes, 0); }
  }
  for (const std::string policy : {"cost", "chain", "milp", "auto"}) {
    SCOPED_TRACE(policy + " within a budget");
    // milp's search cut to half a second: any plan it returns is to be exact.
    const Step step = run(llama(), {.policy = policy, .budget = (low + high) / 2, .solver_time_limit_s = 0.5}, 3);
    EXPECT_EQ(step.grads, expected);
    expect_prediction_holds(step);
    EXPECT_LE(step.report.measured_peak_bytes, (low + high) / 2);
    EXPECT_GT(step.report.replayed_nodes, 0);
  }
}

TEST(LlamaCheckpointing, EveryPresetIsBitIdenticalToKeepAllWithAndWithoutABudget) {
  const Grads expected = reference(llama());
  const Step all = run(llama(), {.policy = "none"});
  const int64_t budget = (minimum_budget(all.graph) + all.report.measured_peak_bytes) / 2;
  for (const char* preset : {"save-matmuls", "every-n-blocks:2", "recompute-modules:core_attn",
                             "recompute-modules:attn", "recompute-modules:mlp", "recompute-modules:norm",
                             "recompute-modules:layernorm", "recompute-modules:attn,mlp,norm",
                             "recompute-modules:core_attn,mlp", "recompute-modules:self_attn,*_proj"}) {
    SCOPED_TRACE(preset);
    const Step step = run(llama(), {.policy = preset});
    EXPECT_EQ(step.grads, expected);
    expect_prediction_holds(step);
    EXPECT_GT(step.report.replayed_nodes, 0);
    const Step fitted = run(llama(), {.policy = preset, .budget = budget}, 3);
    EXPECT_EQ(fitted.grads, expected);
    EXPECT_LE(fitted.report.measured_peak_bytes, budget);
  }
}

TEST(LlamaCheckpointing, TheModuleApiGivesKeepAllsGradients) {
  Llama plain(tiny_gqa_llama(2, false, DType::Float32)), checkpointed(tiny_gqa_llama(2, false, DType::Float32));
  checkpointed.gradient_checkpointing_enable({.policy = "blocks"});
  Generator g(1);
  const Tensor ids = randint(13, {2, 8}, g);
  auto grads = [&](Llama& model) {
    for (const Tensor& p : model.parameters()) p.set_grad(Tensor());
    model.forward(ids, shift_labels(ids)).loss.backward();
    return grads_of(model.parameters());
  };
  for (int i = 0; i < 3; ++i) EXPECT_EQ(grads(checkpointed), grads(plain)) << "step " << i;
  EXPECT_GT(checkpointed.checkpointing_report()->replayed_nodes, 0);
}

// Nodes whose tag a plan decides: outputs backward reads, not views, not the loss.
std::vector<int64_t> decided(const GraphProfile& graph) {
  const std::vector<bool> read = read_by_backward(graph);
  std::vector<int64_t> out;
  for (const NodeProfile& node : graph.nodes) {
    if (read[node.position] && node.view_of < 0 && node.output_bytes > 0 && node.position + 1 < graph.size()) {
      out.push_back(node.position);
    }
  }
  return out;
}

TEST(LlamaCheckpointing, RecomputeModulesNamesLlamasPartsAsMegatronDoes) {
  const GraphProfile graph = run(llama(), {.policy = "none"}).graph;
  // Each item, and what a node of its must be.
  const std::vector<std::pair<std::string, std::function<bool(const NodeProfile&)>>> items{
      {"core_attn", [](const NodeProfile& n) { return n.op == "attention"; }},
      {"attn", [](const NodeProfile& n) { return testing::contains(n.module, ".self_attn"); }},
      {"mlp", [](const NodeProfile& n) { return testing::contains(n.module, ".mlp"); }},
      {"norm", [](const NodeProfile& n) { return n.op == "rms_norm"; }},
      {"layernorm", [](const NodeProfile& n) { return n.op == "rms_norm"; }},
  };
  for (const auto& [item, named] : items) {
    SCOPED_TRACE(item);
    const Plan plan = make_plan(graph, {.policy = "recompute-modules:" + item});
    int64_t replayed = 0;
    for (int64_t v : decided(graph)) {
      const NodeProfile& node = graph.nodes[v];
      EXPECT_EQ(plan.tags[v], named(node) ? Tag::Recompute : Tag::Keep) << node.name;
      replayed += plan.tags[v] == Tag::Recompute;
    }
    EXPECT_GE(replayed, 3);  // one per layer at least
  }
  // core_attn: the attention node, never a projection nor the rotary.
  const Plan core = make_plan(graph, {.policy = "recompute-modules:core_attn"});
  for (const NodeProfile& node : graph.nodes) {
    if (node.op == "rotary" || node.op == "linear") { EXPECT_EQ(core.tags[node.position], Tag::Keep) << node.name; }
  }
  const std::string moe = testing::error_of([&] { make_plan(graph, {.policy = "recompute-modules:moe"}); });
  EXPECT_TRUE(testing::contains(moe, "no mixture-of-experts")) << moe;
  const std::string typo = testing::error_of([&] { make_plan(graph, {.policy = "recompute-modules:self_atn"}); });
  EXPECT_TRUE(testing::contains(typo, "nearest: self_attn")) << typo;
}

TEST(LlamaCheckpointing, EveryNBlocksReplaysLayersZeroAndTwo) {
  const GraphProfile graph = run(llama(), {.policy = "none"}).graph;
  const Plan plan = make_plan(graph, {.policy = "every-n-blocks:2"});
  const Plan blocks = make_plan(graph, {.policy = "blocks"});
  for (int64_t v : decided(graph)) {
    const std::string& block = graph.nodes[v].block;
    const bool replayed = block == "model.layers.0" || block == "model.layers.2";
    EXPECT_EQ(plan.tags[v], replayed ? blocks.tags[v] : Tag::Keep) << graph.nodes[v].name;
  }
  EXPECT_GT(plan.dropped_bytes, 0);
  EXPECT_LT(plan.dropped_bytes, blocks.dropped_bytes);
}

}  // namespace
}  // namespace remat::nn
