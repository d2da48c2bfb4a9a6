// GPT: GPT-2's parameter names and shapes, the W2 parameter count, block
// marks in the graph, every parameter's gradient against float64 finite
// differences (both MLP paths), the fused MLP's bits against the explicit
// one's and what it keeps, and sampling.
#include "nn/gpt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "engine/allocator.h"
#include "kernels/cpu/parallel.h"
#include "ops/ops.h"

namespace remat::nn {
namespace {

GPTConfig tiny_gpt(bool tied, DType dtype = DType::Float64, MlpPath mlp = MlpPath::Fused) {
  return {.vocab_size = 7, .block_size = 5, .n_layer = 2, .n_head = 2, .n_embd = 4, .dropout = 0.0,
          .tie_weights = tied, .dtype = dtype, .seed = 11, .mlp = mlp};
}

std::map<std::string, Shape> shapes_of(const Module& m) {
  std::map<std::string, Shape> out;
  for (const auto& [name, p] : m.named_parameters()) out[name] = p.shape();
  return out;
}

TEST(GPT, ParameterNamesAndShapesFollowGpt2) {
  const GPT model({.vocab_size = 50, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 8, .tie_weights = false});
  const auto shapes = shapes_of(model);
  EXPECT_EQ(shapes.at("transformer.wte.weight"), (Shape{50, 8}));
  EXPECT_EQ(shapes.at("transformer.wpe.weight"), (Shape{16, 8}));
  EXPECT_EQ(shapes.at("transformer.h.1.ln_1.weight"), (Shape{8}));
  EXPECT_EQ(shapes.at("transformer.h.1.attn.c_attn.weight"), (Shape{8, 24}));  // (in, out), as Conv1D
  EXPECT_EQ(shapes.at("transformer.h.1.attn.c_attn.bias"), (Shape{24}));
  EXPECT_EQ(shapes.at("transformer.h.0.attn.c_proj.weight"), (Shape{8, 8}));
  EXPECT_EQ(shapes.at("transformer.h.0.ln_2.bias"), (Shape{8}));
  EXPECT_EQ(shapes.at("transformer.h.0.mlp.c_fc.weight"), (Shape{8, 32}));
  EXPECT_EQ(shapes.at("transformer.h.0.mlp.c_proj.weight"), (Shape{32, 8}));
  EXPECT_EQ(shapes.at("transformer.ln_f.weight"), (Shape{8}));
  EXPECT_EQ(shapes.at("lm_head.weight"), (Shape{50, 8}));
  // 2 embeddings, 12 tensors per block, ln_f's 2, the head.
  EXPECT_EQ(shapes.size(), 2u + 2 * 12 + 2 + 1);
}

TEST(GPT, TiedHeadSharesTheTokenEmbedding) {
  const GPT model(tiny_gpt(true));
  const auto shapes = shapes_of(model);
  EXPECT_EQ(shapes.count("lm_head.weight"), 0u);
  EXPECT_EQ(shapes.size(), 2u + 2 * 12 + 2);
}

TEST(GPT, W2HasTheParameterCountOfWorkloadsMd) {
  const GPT model({.vocab_size = 256, .block_size = 128, .n_layer = 6, .n_head = 4, .n_embd = 256,
                   .tie_weights = false});
  // 256*256 + 128*256 + 6 * (2*2*256 + 256*768+768 + 256*256+256 + 256*1024+1024 + 1024*256+256) + 2*256 + 256*256
  EXPECT_EQ(model.num_parameters(), 4902912);
}

TEST(GPT, InitialisationIsGpt2s) {
  const GPT model({.vocab_size = 256, .block_size = 128, .n_layer = 1, .n_head = 4, .n_embd = 256});
  for (const auto& [name, p] : model.named_parameters()) {
    const std::vector<float> v = p.to_vector<float>();
    double sum = 0, squares = 0;
    for (float x : v) sum += x, squares += double(x) * x;
    const double mean = sum / v.size(), std = std::sqrt(squares / v.size() - mean * mean);
    if (name.find("ln_") != std::string::npos && name.ends_with("weight")) {
      EXPECT_EQ(mean, 1.0) << name;
    } else if (name.ends_with("bias")) {
      EXPECT_EQ(squares, 0.0) << name;
    } else {
      EXPECT_NEAR(std, 0.02, 0.002) << name;
    }
  }
}

TEST(GPT, LossAtInitIsNearLogV) {
  GPT model({.vocab_size = 64, .block_size = 32, .n_layer = 2, .n_head = 2, .n_embd = 32});
  Generator g(1);
  const Tensor ids = randint(64, {4, 32}, g);
  const GPTOutput out = model.forward(ids, randint(64, {4, 32}, g));
  EXPECT_EQ(out.logits.shape(), (Shape{4, 32, 64}));
  EXPECT_NEAR(out.loss.item<double>(), std::log(64.0), 0.05);
}

TEST(GPT, BlocksAreMarkedInTheGraph) {
  GPT model(tiny_gpt(true));
  Generator g(1);
  const Tensor loss = model.forward(randint(7, {1, 5}, g), randint(7, {1, 5}, g)).loss;
  // Walk the graph: every node is outside any block or in transformer.h.0/1,
  // and both blocks occur.
  std::map<std::string, int> seen;
  std::vector<Node*> stack{loss.grad_fn().get()};
  std::set<Node*> visited;
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    if (!node || !visited.insert(node).second) continue;
    seen[node->record().block ? *node->record().block : "(none)"]++;
    for (const Edge& e : node->next_edges()) stack.push_back(e.node.get());
  }
  // At least ln_1, c_attn, attention, c_proj, add, ln_2, c_fc, gelu_affine, add.
  EXPECT_GE(seen["transformer.h.0"], 9);
  EXPECT_GE(seen["transformer.h.1"], 9);
  EXPECT_GT(seen["(none)"], 0);  // embeddings, ln_f, head, loss
  EXPECT_EQ(seen.size(), 3u);
}

// Every element of every parameter: analytic gradient against central
// differences of the float64 loss.
void check_all_gradients(bool tied, MlpPath mlp = MlpPath::Fused) {
  GPT model(tiny_gpt(tied, DType::Float64, mlp));
  Generator g(2);
  {
    NoGradGuard no_grad;
    for (const auto& [name, p] : model.named_parameters()) {
      const Tensor values = normal(p.shape(), 0.0, 0.5, DType::Float64, g);
      std::copy_n(values.data<double>(), values.numel(), p.data<double>());
    }
  }
  const Tensor ids = randint(7, {2, 5}, g), targets = randint(7, {2, 5}, g);
  model.forward(ids, targets).loss.backward();
  NoGradGuard no_grad;
  double worst = 0;
  std::string where;
  for (const auto& [name, p] : model.named_parameters()) {
    const std::vector<double> analytic = p.grad().to_vector<double>();
    double* data = p.data<double>();
    for (int64_t j = 0; j < p.numel(); ++j) {
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

TEST(GPT, EveryParameterGradientMatchesFiniteDifferences) { check_all_gradients(/*tied=*/true); }
TEST(GPT, EveryParameterGradientMatchesFiniteDifferencesUntied) { check_all_gradients(/*tied=*/false); }
TEST(GPT, EveryParameterGradientMatchesFiniteDifferencesExplicitMlp) {
  check_all_gradients(/*tied=*/false, MlpPath::Explicit);
}

// How many nodes of each op, by name, the graph behind `loss` has.
std::map<std::string, int> node_names(const Tensor& loss) {
  std::map<std::string, int> names;
  std::set<const Node*> seen;
  std::vector<const Node*> todo{loss.grad_fn().get()};
  while (!todo.empty()) {
    const Node* node = todo.back();
    todo.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    ++names[(node->record().module ? *node->record().module : "") + "/" + std::string(node->name())];
    for (const Edge& e : node->next_edges()) todo.push_back(e.node.get());
  }
  return names;
}

struct MlpStep {
  std::vector<float> loss;
  std::vector<std::vector<float>> grads;
  std::map<std::string, int> nodes;
  int64_t kept_bytes = 0;  // activation bytes held once forward has returned
};

MlpStep mlp_step(MlpPath mlp, double dropout) {
  const GPTConfig config{.vocab_size = 19, .block_size = 12, .n_layer = 2, .n_head = 2, .n_embd = 16,
                         .dropout = dropout, .seed = 5, .mlp = mlp};
  GPT model(config);
  Generator g(8);
  CategoryGuard data(MemoryCategory::Data);
  const Tensor ids = randint(19, {3, 12}, g), targets = randint(19, {3, 12}, g);
  CategoryGuard activations(MemoryCategory::Activation);
  const int64_t before = cpu_allocator().stats().live_of(MemoryCategory::Activation);
  const Tensor loss = model.forward(ids, targets).loss;
  MlpStep s{loss.to_vector<float>(), {}, node_names(loss),
            cpu_allocator().stats().live_of(MemoryCategory::Activation) - before};
  loss.backward();
  for (const Tensor& p : model.parameters()) s.grads.push_back(p.grad().to_vector<float>());
  return s;
}

// The fused MLP (gelu_affine) against GPT-2's three ops: the loss and
// every gradient bit for bit, at 1 and 2 threads, with dropout too (its
// draws come in the same order); GELU and c_proj one node under c_proj's
// name; forward keeps GELU's output (B T 4C floats a block) less.
TEST(GPT, TheFusedMlpHasTheExplicitMlpsBitsAndKeepsGelusOutputLess) {
  for (const double dropout : {0.0, 0.1}) {
    for (const int threads : {1, 2}) {
      SCOPED_TRACE("dropout " + std::to_string(dropout) + ", " + std::to_string(threads) + " threads");
      const kernels::cpu::NumThreadsGuard guard(threads);
      const MlpStep fused = mlp_step(MlpPath::Fused, dropout), explicit_mlp = mlp_step(MlpPath::Explicit, dropout);
      EXPECT_EQ(fused.loss, explicit_mlp.loss);
      EXPECT_EQ(fused.grads, explicit_mlp.grads);
      for (const char* block : {"transformer.h.0", "transformer.h.1"}) {
        const std::string mlp = std::string(block) + ".mlp";
        EXPECT_EQ(fused.nodes.count(mlp + ".c_proj/gelu_affine"), 1u) << mlp;
        EXPECT_EQ(fused.nodes.count(mlp + "/gelu"), 0u) << mlp;
        EXPECT_EQ(fused.nodes.count(mlp + ".c_proj/affine"), 0u) << mlp;
        EXPECT_EQ(fused.nodes.count(mlp + ".c_fc/affine"), 1u) << mlp;
        EXPECT_EQ(explicit_mlp.nodes.count(mlp + "/gelu"), 1u) << mlp;
        EXPECT_EQ(explicit_mlp.nodes.count(mlp + ".c_proj/affine"), 1u) << mlp;
      }
      const int64_t gelu_output = 3 * 12 * 4 * 16 * static_cast<int64_t>(sizeof(float));
      EXPECT_EQ(explicit_mlp.kept_bytes - fused.kept_bytes, 2 * gelu_output);
    }
  }
}

TEST(GPT, MlpPathsByName) {
  EXPECT_EQ(parse_mlp_path("fused"), MlpPath::Fused);
  EXPECT_EQ(parse_mlp_path("explicit"), MlpPath::Explicit);
  EXPECT_EQ(mlp_path_name(MlpPath::Explicit), "explicit");
  EXPECT_THROW(parse_mlp_path("fast"), Error);
}

TEST(GPT, TooLongASequenceIsAnError) {
  GPT model(tiny_gpt(true));
  EXPECT_THROW(model.forward(zeros({1, 6}, DType::Int64), Tensor()), Error);
  EXPECT_THROW(model.forward(zeros({1, 5}, DType::Float64), Tensor()), Error);
}

TEST(GPT, GenerateIsReproducibleAndRestoresTheMode) {
  GPT model(tiny_gpt(true, DType::Float32));
  Generator a(9), b(9);
  const std::vector<int64_t> first = model.generate({1, 2}, 12, 1.0, a);
  const std::vector<int64_t> second = model.generate({1, 2}, 12, 1.0, b);
  EXPECT_EQ(first.size(), 14u);
  EXPECT_EQ(first, second);
  EXPECT_EQ(first[0], 1);
  for (int64_t id : first) EXPECT_TRUE(id >= 0 && id < 7);
  EXPECT_TRUE(model.is_training());
}

}  // namespace
}  // namespace remat::nn
