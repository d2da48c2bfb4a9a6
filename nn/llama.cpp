// Llama; see llama.h. Shapes in comments: B batch, T time, C hidden size,
// H query heads, Hkv key/value heads, D = C / H per head, I the MLP's width,
// V vocabulary.
#include "nn/llama.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/factory.h"
#include "engine/recording.h"
#include "ops/ops.h"

namespace remat::nn {
namespace {

// A module that only holds children (the "model" of HF's names).
class Container : public Module {
 public:
  std::string_view type_name() const override { return "Container"; }
};

void check_config(const LlamaConfig& c) {
  REMAT_CHECK(c.vocab_size > 0 && c.hidden_size > 0 && c.intermediate_size > 0 && c.num_hidden_layers > 0 &&
                  c.num_attention_heads > 0 && c.num_key_value_heads >= 0 && c.max_position_embeddings > 0,
              "Llama: sizes must be positive (vocab_size {}, hidden_size {}, intermediate_size {}, "
              "num_hidden_layers {}, num_attention_heads {}, max_position_embeddings {}) and num_key_value_heads "
              ">= 0 (0: num_attention_heads), got {}",
              c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads,
              c.max_position_embeddings, c.num_key_value_heads);
  REMAT_CHECK(c.hidden_size % c.num_attention_heads == 0, "Llama: hidden_size {} is not divisible by "
              "num_attention_heads {}", c.hidden_size, c.num_attention_heads);
  REMAT_CHECK(c.num_attention_heads % c.kv_heads() == 0, "Llama: num_key_value_heads {} does not divide "
              "num_attention_heads {}", c.kv_heads(), c.num_attention_heads);
  REMAT_CHECK(c.head_dim() % 2 == 0, "Llama: head_dim {} (hidden_size {} / num_attention_heads {}) must be even "
              "for rotary embeddings", c.head_dim(), c.hidden_size, c.num_attention_heads);
  REMAT_CHECK(std::isfinite(c.rope_theta) && c.rope_theta > 0, "Llama: rope_theta must be finite and > 0, got {}",
              c.rope_theta);
  REMAT_CHECK(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0, "Llama: rms_norm_eps must be finite and > 0, "
              "got {}", c.rms_norm_eps);
  REMAT_CHECK(std::isfinite(c.initializer_range) && c.initializer_range >= 0, "Llama: initializer_range is a "
              "standard deviation, finite and >= 0, got {}", c.initializer_range);
  REMAT_CHECK(c.dtype == DType::Float32 || c.dtype == DType::Float64, "Llama: dtype must be float32 or float64, "
              "got {}", dtype_name(c.dtype));
}

LlamaConfig resolved(LlamaConfig c) {
  check_config(c);
  c.num_key_value_heads = c.kv_heads();
  return c;
}

// A bias-free Linear with HF's initialisation, N(0, std) from `init`. The
// uniform draw of Linear's own (PyTorch's) default goes to a scratch
// generator, so that `init` yields the normal draws alone, in parameter
// order. Inside a MetaScope (a model built on the meta device, to be
// planned: engine/meta.h) the weights are meta tensors and nothing is drawn.
std::shared_ptr<Linear> make_linear(int64_t in, int64_t out, const LlamaConfig& config, Generator& init) {
  Generator scratch(0);
  auto linear = std::make_shared<Linear>(in, out, /*bias=*/false, scratch, config.dtype);
  if (linear->weight().device().is_meta()) return linear;
  NoGradGuard no_grad;
  const Tensor w = normal(linear->weight().shape(), 0.0, config.initializer_range, config.dtype, init);
  std::copy_n(static_cast<const char*>(w.raw_data()), w.nbytes(), static_cast<char*>(linear->weight().raw_data()));
  return linear;
}

}  // namespace

LlamaRMSNorm::LlamaRMSNorm(int64_t dim, double eps, DType dtype) : eps_(eps) {
  REMAT_CHECK(dim > 0 && eps > 0, "LlamaRMSNorm: need dim > 0 and eps > 0, got {} and {}", dim, eps);
  CategoryGuard category(MemoryCategory::Parameter);
  weight_ = register_parameter("weight", ones({dim}, dtype));
}

Tensor LlamaRMSNorm::forward(const Tensor& x) {
  const ModuleScope scope = name_scope();
  return rms_norm(x, weight_, eps_);
}

LlamaAttention::LlamaAttention(const LlamaConfig& config, Generator& init)
    : heads_(config.num_attention_heads),
      kv_heads_(config.kv_heads()),
      head_dim_(config.head_dim()),
      rope_theta_(config.rope_theta) {
  const int64_t C = config.hidden_size;
  q_proj_ = register_module("q_proj", make_linear(C, heads_ * head_dim_, config, init));
  k_proj_ = register_module("k_proj", make_linear(C, kv_heads_ * head_dim_, config, init));
  v_proj_ = register_module("v_proj", make_linear(C, kv_heads_ * head_dim_, config, init));
  o_proj_ = register_module("o_proj", make_linear(heads_ * head_dim_, C, config, init));
}

// Each handle goes once its last reader has run (x once v_proj has read
// it, each projection once its heads are rotated or attended), so a value
// the plan drops is freed at once rather than when forward returns.
Tensor LlamaAttention::forward(Tensor&& x) {
  REMAT_CHECK(x.dim() == 3, "LlamaAttention: input must be (B, T, C), got {}", str(x.shape()));
  const ModuleScope scope = name_scope();
  const int64_t B = x.size(0), T = x.size(1), H = heads_, Hkv = kv_heads_, D = head_dim_;
  // A (B, T, heads D) projection's (B, heads, T, D) view, no copy.
  auto heads = [&](const Tensor& projection, int64_t n) { return transpose(view(projection, {B, T, n, D}), 1, 2); };
  Tensor y;  // (B, T, H D)
  {
    // Named, so that they are recorded in this order whatever order a
    // compiler evaluates function arguments in: plans apply by position.
    Tensor q = q_proj_->forward(x);                                // (B, T, H D)
    Tensor k = k_proj_->forward(x);                                // (B, T, Hkv D)
    const Tensor v = v_proj_->forward(std::exchange(x, Tensor()));  // (B, T, Hkv D)
    q = rotary(heads(q, H), rope_theta_);                          // (B, H, T, D), dense
    k = rotary(heads(k, Hkv), rope_theta_);                        // (B, Hkv, T, D), dense
    // Query head h reads kv head h / (H / Hkv); the output (B, T, H, D),
    // the heads side by side, so that o_proj reads it as a view.
    y = view(attention(q, k, heads(v, Hkv), {.causal = true, .tokens_first = true}), {B, T, H * D});
  }
  return o_proj_->forward(y);
}

LlamaMLP::LlamaMLP(const LlamaConfig& config, Generator& init) : fused_(config.fused_mlp) {
  const int64_t C = config.hidden_size, I = config.intermediate_size;
  gate_proj_ = register_module("gate_proj", make_linear(C, I, config, init));
  up_proj_ = register_module("up_proj", make_linear(C, I, config, init));
  down_proj_ = register_module("down_proj", make_linear(I, C, config, init));
}

Tensor LlamaMLP::forward(Tensor&& x) {
  const ModuleScope scope = name_scope();
  const Tensor gate = gate_proj_->forward(x);                      // (B, T, I)
  const Tensor up = up_proj_->forward(std::exchange(x, Tensor()));  // (B, T, I)
  if (!fused_) return down_proj_->forward(swiglu(gate, up));       // (B, T, C)
  // down_proj(swiglu(gate, up)) as one node under down_proj's name: it keeps
  // gate and up, and makes swiglu(gate, up) again in backward for dW.
  const ModuleScope down_proj_scope(down_proj_->path());
  return swiglu_linear(gate, up, down_proj_->weight(), down_proj_->bias());  // (B, T, C)
}

// Registered in HF's order (self_attn, mlp, then the norms), so that
// named_parameters() lists a layer as LlamaDecoderLayer's state_dict does.
LlamaDecoderLayer::LlamaDecoderLayer(const LlamaConfig& config, Generator& init) {
  self_attn_ = register_module("self_attn", std::make_shared<LlamaAttention>(config, init));
  mlp_ = register_module("mlp", std::make_shared<LlamaMLP>(config, init));
  input_layernorm_ = register_module(
      "input_layernorm", std::make_shared<LlamaRMSNorm>(config.hidden_size, config.rms_norm_eps, config.dtype));
  post_attention_layernorm_ = register_module(
      "post_attention_layernorm",
      std::make_shared<LlamaRMSNorm>(config.hidden_size, config.rms_norm_eps, config.dtype));
}

Tensor LlamaDecoderLayer::forward(const Tensor& x) {
  const ModuleScope scope = name_scope();
  const Tensor h = add(x, self_attn_->forward(input_layernorm_->forward(x)));
  return add(h, mlp_->forward(post_attention_layernorm_->forward(h)));
}

Llama::Llama(const LlamaConfig& config) : config_(resolved(config)) {
  Generator init(config_.seed);
  model_ = register_module("model", std::make_shared<Container>());
  embed_tokens_ = model_->register_module(
      "embed_tokens", std::make_shared<Embedding>(config_.vocab_size, config_.hidden_size, config_.initializer_range,
                                                  init, config_.dtype));
  layers_ = model_->register_module("layers", std::make_shared<Sequential>());
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    layers_->push_back(std::make_shared<LlamaDecoderLayer>(config_, init));
  }
  norm_ = model_->register_module(
      "norm", std::make_shared<LlamaRMSNorm>(config_.hidden_size, config_.rms_norm_eps, config_.dtype));
  if (!config_.tie_word_embeddings) {
    lm_head_ = register_module("lm_head", make_linear(config_.hidden_size, config_.vocab_size, config_, init));
  }
}

LlamaOutput Llama::forward(const Tensor& ids, const Tensor& targets) {
  REMAT_CHECK(ids.dim() == 2 && ids.dtype() == DType::Int64 && ids.size(1) >= 1, "Llama: ids must be int64 (B, T) "
              "with T >= 1, got {}", ids.str());
  REMAT_CHECK(!targets.defined() || (targets.dtype() == DType::Int64 && targets.shape() == ids.shape()),
              "Llama: targets must be int64 of ids' shape {}, got {}", str(ids.shape()), targets.str());
  const auto recording = record_forward();
  const ModuleScope scope = name_scope();
  Tensor x = embed_tokens_->forward(ids);  // (B, T, C)
  for (size_t i = 0; i < layers_->size(); ++i) {
    BlockScope block(fmt::format("model.layers.{}", i));
    x = (*layers_)[i]->forward(x);
  }
  x = norm_->forward(x);
  LlamaOutput out;
  if (lm_head_) {
    out.logits = lm_head_->forward(x);  // (B, T, V)
  } else {
    // The tied head's node is named as an untied one's ("lm_head/linear"),
    // so that one rule names both.
    const ModuleScope head(path().empty() ? std::string("lm_head") : path() + ".lm_head");
    out.logits = linear(x, embed_tokens_->weight());
  }
  x = Tensor();  // the norm's output, not held through the loss
  if (targets.defined()) out.loss = cross_entropy(out.logits, targets);  // -100: ignored
  return out;
}

Tensor shift_labels(const Tensor& labels) {
  REMAT_CHECK(labels.defined() && labels.dim() == 2 && labels.dtype() == DType::Int64, "shift_labels: labels must "
              "be int64 (B, T), got {}", labels.str());
  const int64_t B = labels.size(0), T = labels.size(1);
  const std::vector<int64_t> in = labels.to_vector<int64_t>();
  std::vector<int64_t> out(in.size(), -100);
  for (int64_t b = 0; b < B; ++b) {
    std::copy(in.begin() + b * T + 1, in.begin() + (b + 1) * T, out.begin() + b * T);
  }
  CategoryGuard data(MemoryCategory::Data);
  return remat::to(from_vector(out, {B, T}), labels.device());
}

}  // namespace remat::nn
