// GPT: a decoder-only transformer with the layout and parameter names of
// GPT-2 (Hugging Face's GPT2LMHeadModel), so weights move between this engine
// and the Python ecosystem through safetensors files:
//
//   transformer.wte.weight (V, C)            transformer.wpe.weight (block_size, C)
//   transformer.h.{i}.ln_1.weight/bias (C)   transformer.h.{i}.attn.c_attn.weight (C, 3C), .bias (3C)
//   transformer.h.{i}.attn.c_proj.weight (C, C), .bias
//   transformer.h.{i}.ln_2.weight/bias       transformer.h.{i}.mlp.c_fc.weight (C, 4C), .bias (4C)
//   transformer.h.{i}.mlp.c_proj.weight (4C, C), .bias (C)
//   transformer.ln_f.weight/bias             lm_head.weight (V, C): only when untied
//
// Pre-LayerNorm blocks, learned positions, GELU (tanh), causal attention as
// one fused op (ops/attention.h; or, for teaching, matmul scaled in the GEMM
// + causal_softmax), and the MLP's c_proj of its GELU as one op that keeps
// GELU's input only (ops/activation_linear.h; or the two ops). Each block's forward runs in a
// BlockScope named like its parameters ("transformer.h.3"), which is how the
// scheduler learns the block boundaries.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/dtype.h"
#include "engine/rng.h"
#include "nn/conv1d.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/sequential.h"

namespace remat::nn {

// Which attention a GPT block runs: the fused op (ops/attention.h, which
// keeps no (T, T) probabilities for backward), or the explicit q k^T, causal
// softmax and product of GPT-2's code, for teaching and comparison. With
// dropout > 0 the explicit path runs whatever is asked: the fused op has no
// dropout on its probabilities.
enum class AttentionPath { Fused, Explicit };
std::string_view attention_path_name(AttentionPath path);  // "fused", "explicit"
// "fused" or "explicit"; anything else is an error naming it.
AttentionPath parse_attention_path(std::string_view name);

// Which MLP a GPT block runs: c_fc, then c_proj of GELU as one op
// (gelu_affine, ops/activation_linear.h), which keeps GELU's input and not
// its output, making GELU again in backward; or c_fc, gelu and c_proj as
// three ops, GPT-2's code, for teaching and comparison. The same bits
// either way (loss and gradients); keep-all holds 4C floats a token less
// per block fused.
enum class MlpPath { Fused, Explicit };
std::string_view mlp_path_name(MlpPath path);  // "fused", "explicit"
// "fused" or "explicit"; anything else is an error naming it.
MlpPath parse_mlp_path(std::string_view name);

struct GPTConfig {
  int64_t vocab_size = 256;
  int64_t block_size = 128;  // the longest context
  int64_t n_layer = 6;
  int64_t n_head = 4;
  int64_t n_embd = 256;
  double dropout = 0.0;
  bool tie_weights = true;   // lm_head shares transformer.wte.weight
  double init_std = 0.02;    // every weight and embedding N(0, init_std); biases 0
  double layer_norm_eps = 1e-5;
  DType dtype = DType::Float32;
  uint64_t seed = 0;         // initialisation and dropout
  AttentionPath attention = AttentionPath::Fused;  // Explicit also whenever dropout > 0
  MlpPath mlp = MlpPath::Fused;
};

// Causal multi-head self-attention: c_attn (C -> 3C), heads, c_proj (C -> C).
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(const GPTConfig& config, Generator& init, Generator& dropout);
  std::string_view type_name() const override { return "CausalSelfAttention"; }
  // x (B, T, C) -> (B, T, C)
  Tensor forward(const Tensor& x) override { return forward(Tensor(x)); }
  // The same, letting go of x once it is read: a block hands over its layer
  // norm's output, which a plan that drops it then frees at once instead of
  // holding it through the whole sublayer.
  Tensor forward(Tensor&& x);

 private:
  int64_t n_head_;
  bool fused_;  // the fused attention op (config.attention, and no dropout)
  std::shared_ptr<Conv1D> c_attn_, c_proj_;
  std::shared_ptr<Dropout> attn_dropout_, resid_dropout_;
};

// The feed-forward part of a block: c_fc (C -> 4C), GELU, c_proj (4C -> C);
// with MlpPath::Fused, GELU and c_proj are one node, recorded under c_proj's
// name ("transformer.h.3.mlp.c_proj/gelu_affine").
class GPTMlp : public Module {
 public:
  GPTMlp(const GPTConfig& config, Generator& init, Generator& dropout);
  std::string_view type_name() const override { return "GPTMlp"; }
  Tensor forward(const Tensor& x) override { return forward(Tensor(x)); }
  Tensor forward(Tensor&& x);  // lets go of x once c_fc has read it, as attention does

 private:
  bool fused_;  // config.mlp == MlpPath::Fused
  std::shared_ptr<Conv1D> c_fc_, c_proj_;
  std::shared_ptr<Dropout> dropout_;
};

// x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class Block : public Module {
 public:
  Block(const GPTConfig& config, Generator& init, Generator& dropout);
  std::string_view type_name() const override { return "Block"; }
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<GPTMlp> mlp_;
};

struct GPTOutput {
  Tensor logits;  // (B, T, V)
  Tensor loss;    // scalar mean cross-entropy, when targets were given
};

class GPT : public Module {
 public:
  explicit GPT(const GPTConfig& config);
  std::string_view type_name() const override { return "GPT"; }

  // ids int64 (B, T) with T <= block_size; targets int64 (B, T) or undefined.
  GPTOutput forward(const Tensor& ids, const Tensor& targets);
  // The logits only.
  Tensor forward(const Tensor& ids) override { return forward(ids, Tensor()).logits; }

  // Appends max_new_tokens ids sampled one at a time from softmax(logits /
  // temperature) of the last position, conditioning on at most block_size
  // ids. Runs without grad in eval mode and restores the mode after.
  std::vector<int64_t> generate(std::vector<int64_t> ids, int64_t max_new_tokens, double temperature,
                                Generator& generator);

  const GPTConfig& config() const { return config_; }
  // The generator every Dropout of the model draws from; its offset is part
  // of a training checkpoint.
  Generator& dropout_generator() { return dropout_generator_; }
  std::vector<Generator*> random_generators() override { return {&dropout_generator_}; }

 private:
  GPTConfig config_;
  Generator init_generator_;
  Generator dropout_generator_;
  std::shared_ptr<Module> transformer_;
  std::shared_ptr<Embedding> wte_, wpe_;
  std::shared_ptr<Dropout> drop_;
  std::shared_ptr<Sequential> h_;
  std::shared_ptr<LayerNorm> ln_f_;
  std::shared_ptr<Linear> lm_head_;  // null when tied
  Tensor positions_;                 // int64 (block_size): 0, 1, ...
};

}  // namespace remat::nn
