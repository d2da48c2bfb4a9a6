// Llama: the decoder-only transformer of Hugging Face's LlamaForCausalLM
// (Llama 1-3, TinyLlama, SmolLM, ...), with its config's names and its
// state_dict's parameter names, so weights move to and from transformers
// through Hugging Face folders (nn/llama_pretrained.h). Not the rope-scaled
// (Llama 3.1's "rope_scaling"), biased or MoE variants: loading a config
// that asks for one is an error (llama_pretrained.h).
//
//   model.embed_tokens.weight (V, C)
//   model.layers.{i}.self_attn.q_proj.weight (H D, C)    .k_proj/.v_proj.weight (Hkv D, C)
//   model.layers.{i}.self_attn.o_proj.weight (C, H D)
//   model.layers.{i}.mlp.gate_proj.weight (I, C)  .up_proj.weight (I, C)  .down_proj.weight (C, I)
//   model.layers.{i}.input_layernorm.weight (C)   .post_attention_layernorm.weight (C)
//   model.norm.weight (C)                         lm_head.weight (V, C): only when untied
//
// Pre-norm blocks, no biases anywhere:
//   h   = x + o_proj(attention(rotary(q_proj(n)), rotary(k_proj(n)), v_proj(n))),  n = input_layernorm(x)
//   out = h + down_proj(swiglu(gate_proj(m), up_proj(m))),                          m = post_attention_layernorm(h)
// with q, k, v viewed as (B, heads, T, D), causal grouped-query attention
// (ops/attention.h), RoPE in HF's rotate-half convention (ops/rotary.h),
// RMSNorm (ops/rms_norm.h), and down_proj of silu(gate) * up as one op that
// keeps gate and up only (ops/activation_linear.h; with fused_mlp false,
// swiglu (ops/swiglu.h) then down_proj).
// Each decoder layer runs in a BlockScope "model.layers.i", and every node
// is named by HF's module path ("model.layers.3.self_attn.q_proj/linear",
// "model.layers.3.self_attn/attention", "model.layers.3.mlp.down_proj/swiglu_linear"), so
// checkpointing policies, presets and rules see transformers' names.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "engine/dtype.h"
#include "engine/rng.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/sequential.h"

namespace remat::nn {

// LlamaConfig's fields by Hugging Face's names and meaning, with its
// defaults (those of Llama 2 7B's shape; tests and workloads set small
// ones). Checked by the Llama constructor.
struct LlamaConfig {
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;         // C
  int64_t intermediate_size = 11008;  // I, the MLP's width
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;   // H
  // Hkv, dividing H: H (multi-head), 1 (multi-query) or between (grouped);
  // 0 means H, as HF's None does.
  int64_t num_key_value_heads = 0;
  // Recorded and saved (HF's meaning: the context trained for); RoPE needs
  // no table of that size, so longer sequences run, as in transformers.
  int64_t max_position_embeddings = 2048;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;         // HF's default; Llama's own configs say 1e-5
  bool tie_word_embeddings = false;   // lm_head shares model.embed_tokens.weight
  double initializer_range = 0.02;    // every Linear and the embedding N(0, this); norms 1
  DType dtype = DType::Float32;       // of the parameters: float32 or float64
  uint64_t seed = 0;                  // of the initialisation
  // remat's, not HF's: down_proj(swiglu(gate, up)) as one op that keeps
  // gate and up, not the (B, T, I) product (swiglu_linear,
  // ops/activation_linear.h); false: swiglu then down_proj, two ops. The
  // same bits either way.
  bool fused_mlp = true;

  // D = C / H (HF's head_dim; remat computes no other).
  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  // Hkv with 0 read as H.
  int64_t kv_heads() const { return num_key_value_heads > 0 ? num_key_value_heads : num_attention_heads; }
};

// HF's LlamaRMSNorm: weight (C) = 1 at start, y = x / rms(x) * weight.
class LlamaRMSNorm : public Module {
 public:
  LlamaRMSNorm(int64_t dim, double eps, DType dtype);
  std::string_view type_name() const override { return "LlamaRMSNorm"; }
  Tensor forward(const Tensor& x) override;  // (..., C) -> (..., C)
  const Tensor& weight() const { return weight_; }

 private:
  double eps_;
  Tensor weight_;
};

// q_proj, k_proj, v_proj (C -> H D, Hkv D, Hkv D), RoPE on q and k, causal
// grouped-query attention, o_proj (H D -> C).
class LlamaAttention : public Module {
 public:
  LlamaAttention(const LlamaConfig& config, Generator& init);
  std::string_view type_name() const override { return "LlamaAttention"; }
  // x (B, T, C) -> (B, T, C)
  Tensor forward(const Tensor& x) override { return forward(Tensor(x)); }
  // The same, letting go of x once the three projections have read it (a
  // plan that drops the norm's output then frees it at once).
  Tensor forward(Tensor&& x);

 private:
  int64_t heads_, kv_heads_, head_dim_;
  double rope_theta_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, o_proj_;
};

// gate_proj, up_proj (C -> I), silu(gate) * up, down_proj (I -> C); with
// fused_mlp, the last two are one node named as down_proj's linear was
// ("model.layers.3.mlp.down_proj/swiglu_linear").
class LlamaMLP : public Module {
 public:
  LlamaMLP(const LlamaConfig& config, Generator& init);
  std::string_view type_name() const override { return "LlamaMLP"; }
  Tensor forward(const Tensor& x) override { return forward(Tensor(x)); }
  Tensor forward(Tensor&& x);  // lets go of x once both projections have read it

 private:
  bool fused_;  // config.fused_mlp
  std::shared_ptr<Linear> gate_proj_, up_proj_, down_proj_;
};

// x + self_attn(input_layernorm(x)), then h + mlp(post_attention_layernorm(h)).
class LlamaDecoderLayer : public Module {
 public:
  LlamaDecoderLayer(const LlamaConfig& config, Generator& init);
  std::string_view type_name() const override { return "LlamaDecoderLayer"; }
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<LlamaAttention> self_attn_;
  std::shared_ptr<LlamaMLP> mlp_;
  std::shared_ptr<LlamaRMSNorm> input_layernorm_, post_attention_layernorm_;
};

struct LlamaOutput {
  Tensor logits;  // (B, T, V)
  Tensor loss;    // scalar, when targets were given
};

// Built inside a MetaScope (engine/meta.h), its parameters are meta tensors
// holding no values and nothing is drawn: a model of any size to rehearse
// and plan (`remat explain --model llama --device meta`).
class Llama : public Module {
 public:
  explicit Llama(const LlamaConfig& config);
  std::string_view type_name() const override { return "Llama"; }

  // ids int64 (B, T), T >= 1; targets int64 (B, T) or undefined. The loss is
  // the mean cross-entropy of logits[b, t] against targets[b, t] over the
  // positions whose target is not -100: targets are the next tokens already
  // (as GPT's). HF's `labels` (the ids themselves, shifted inside the
  // model) give HF's loss through shift_labels(labels).
  LlamaOutput forward(const Tensor& ids, const Tensor& targets);
  // The logits only.
  Tensor forward(const Tensor& ids) override { return forward(ids, Tensor()).logits; }

  // The configuration, with num_key_value_heads resolved (never 0).
  const LlamaConfig& config() const { return config_; }

 private:
  LlamaConfig config_;
  std::shared_ptr<Module> model_;
  std::shared_ptr<Embedding> embed_tokens_;
  std::shared_ptr<Sequential> layers_;
  std::shared_ptr<LlamaRMSNorm> norm_;
  std::shared_ptr<Linear> lm_head_;  // null when tied
};

// HF's labels convention as targets: labels int64 (B, T) -> (B, T) with
// out[:, t] = labels[:, t + 1] and out[:, T - 1] = -100 (ignored), on
// labels' device. forward(ids, shift_labels(labels)).loss is
// LlamaForCausalLM(input_ids=ids, labels=labels).loss.
Tensor shift_labels(const Tensor& labels);

}  // namespace remat::nn
