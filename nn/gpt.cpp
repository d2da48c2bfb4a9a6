// GPT; see gpt.h. Shapes in comments: B batch, T time, C channels, H heads,
// D = C / H per head, V vocabulary.
#include "nn/gpt.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/factory.h"
#include "engine/meta.h"
#include "nn/generate.h"
#include "ops/ops.h"

namespace remat::nn {

std::string_view attention_path_name(AttentionPath path) {
  return path == AttentionPath::Fused ? "fused" : "explicit";
}

AttentionPath parse_attention_path(std::string_view name) {
  if (name == "fused") return AttentionPath::Fused;
  if (name == "explicit") return AttentionPath::Explicit;
  REMAT_FAIL("attention: unknown path '{}' (available: fused, explicit)", name);
}

std::string_view mlp_path_name(MlpPath path) { return path == MlpPath::Fused ? "fused" : "explicit"; }

MlpPath parse_mlp_path(std::string_view name) {
  if (name == "fused") return MlpPath::Fused;
  if (name == "explicit") return MlpPath::Explicit;
  REMAT_FAIL("mlp: unknown path '{}' (available: fused, explicit)", name);
}

namespace {

// A module that only holds children (the "transformer" of GPT-2's names).
class Container : public Module {
 public:
  std::string_view type_name() const override { return "Container"; }
};

void check_config(const GPTConfig& c) {
  REMAT_CHECK(c.vocab_size > 0 && c.block_size > 0 && c.n_layer > 0 && c.n_head > 0 && c.n_embd > 0,
              "GPT: sizes must be positive (vocab {}, block {}, layers {}, heads {}, embd {})", c.vocab_size,
              c.block_size, c.n_layer, c.n_head, c.n_embd);
  REMAT_CHECK(c.n_embd % c.n_head == 0, "GPT: n_embd {} is not divisible by n_head {}", c.n_embd, c.n_head);
  REMAT_CHECK(c.dropout >= 0 && c.dropout < 1, "GPT: dropout must be in [0, 1), got {}", c.dropout);
}

}  // namespace

CausalSelfAttention::CausalSelfAttention(const GPTConfig& config, Generator& init, Generator& dropout)
    : n_head_(config.n_head), fused_(config.attention == AttentionPath::Fused && config.dropout == 0.0) {
  c_attn_ = register_module("c_attn", std::make_shared<Conv1D>(config.n_embd, 3 * config.n_embd, config.init_std, init,
                                                               config.dtype));
  c_proj_ = register_module("c_proj", std::make_shared<Conv1D>(config.n_embd, config.n_embd, config.init_std, init,
                                                               config.dtype));
  attn_dropout_ = register_module("attn_dropout", std::make_shared<Dropout>(config.dropout, dropout));
  resid_dropout_ = register_module("resid_dropout", std::make_shared<Dropout>(config.dropout, dropout));
}

// Each handle here goes once its last reader has run (x once c_attn has read
// it, qkv's heads and the probabilities once the P V product is made), so a
// value the plan drops is freed at once rather than when forward returns.
Tensor CausalSelfAttention::forward(Tensor&& x) {
  REMAT_CHECK(x.dim() == 3, "CausalSelfAttention: input must be (B, T, C), got {}", str(x.shape()));
  const ModuleScope scope = name_scope();
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), H = n_head_, D = C / H;
  Tensor y;  // (B, T, C)
  {
    const Tensor qkv = c_attn_->forward(std::exchange(x, Tensor()));  // (B, T, 3C)
    if (fused_) {
      // softmax(q k^T / sqrt(D), causal) v over qkv's heads as they lie,
      // (B, T, C): saves qkv, y and a log-sum-exp per row; y is c_proj's
      // input too, and qkv's gradient is written whole by one node.
      y = attention_qkv(qkv, H, H);
    } else {
      // Head i of q, k or v: a (B, H, T, D) view into qkv, no copy.
      auto heads = [&](int64_t part) {
        return transpose(view(slice(qkv, 2, part * C, (part + 1) * C), {B, T, H, D}), 1, 2);
      };
      // Named, so that they are recorded in this order whatever order a
      // compiler evaluates function arguments in: plans apply by position.
      const Tensor q = heads(0), k = heads(1), v = heads(2);
      // Scores scaled by 1/sqrt(D) in the GEMM itself (its alpha), then the
      // mask and softmax as one op: row i weighs positions 0..i only.
      Tensor att = matmul(q, transpose(k, -2, -1), 1.0 / std::sqrt(static_cast<double>(D)));  // (B, H, T, T)
      att = attn_dropout_->forward(causal_softmax(att));
      y = reshape(transpose(matmul(att, v), 1, 2), {B, T, C});  // (B, H, T, D) -> (B, T, C)
    }
  }
  return resid_dropout_->forward(c_proj_->forward(y));
}

GPTMlp::GPTMlp(const GPTConfig& config, Generator& init, Generator& dropout)
    : fused_(config.mlp == MlpPath::Fused) {
  c_fc_ = register_module("c_fc", std::make_shared<Conv1D>(config.n_embd, 4 * config.n_embd, config.init_std, init,
                                                           config.dtype));
  c_proj_ = register_module("c_proj", std::make_shared<Conv1D>(4 * config.n_embd, config.n_embd, config.init_std, init,
                                                               config.dtype));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(config.dropout, dropout));
}

// As attention's: x goes once c_fc has read it, GELU's output once c_proj has.
Tensor GPTMlp::forward(Tensor&& x) {
  const ModuleScope scope = name_scope();
  Tensor h;
  if (fused_) {
    h = c_fc_->forward(std::exchange(x, Tensor()));  // (B, T, 4C)
    // c_proj(gelu(h)) as one node named as c_proj's affine was, so that
    // rules and presets naming mlp.c_proj still name it: it keeps h (not
    // gelu(h)) and makes gelu(h) again in backward for c_proj's dW.
    const ModuleScope c_proj_scope(c_proj_->path());
    h = gelu_affine(h, c_proj_->weight(), c_proj_->bias());  // (B, T, C)
  } else {
    if (fused_epilogues_apply(c_fc_->weight())) {
      // On a GPU with fused epilogues on, c_fc and GELU are one op whose
      // GEMM adds the bias and applies GELU (affine_gelu; Note [Fused
      // epilogues] in kernels/cuda/gemm.h).
      h = affine_gelu(std::exchange(x, Tensor()), c_fc_->weight(), c_fc_->bias());  // (B, T, 4C)
    } else {
      h = c_fc_->forward(std::exchange(x, Tensor()));  // (B, T, 4C)
      // A plan may drop this GELU output: c_proj's backward then replays gelu
      // from c_fc's output to read it (docs/design.md, "One value's walk").
      h = gelu(h);
    }
    h = c_proj_->forward(h);  // (B, T, C)
  }
  return dropout_->forward(h);
}

Block::Block(const GPTConfig& config, Generator& init, Generator& dropout) {
  ln_1_ = register_module("ln_1", std::make_shared<LayerNorm>(config.n_embd, config.layer_norm_eps, config.dtype));
  attn_ = register_module("attn", std::make_shared<CausalSelfAttention>(config, init, dropout));
  ln_2_ = register_module("ln_2", std::make_shared<LayerNorm>(config.n_embd, config.layer_norm_eps, config.dtype));
  mlp_ = register_module("mlp", std::make_shared<GPTMlp>(config, init, dropout));
}

Tensor Block::forward(const Tensor& x) {
  const ModuleScope scope = name_scope();
  const Tensor h = add(x, attn_->forward(ln_1_->forward(x)));
  return add(h, mlp_->forward(ln_2_->forward(h)));
}

GPT::GPT(const GPTConfig& config)
    : config_((check_config(config), config)), init_generator_(config.seed), dropout_generator_(config.seed + 1) {
  transformer_ = register_module("transformer", std::make_shared<Container>());
  wte_ = transformer_->register_module(
      "wte", std::make_shared<Embedding>(config.vocab_size, config.n_embd, config.init_std, init_generator_, config.dtype));
  wpe_ = transformer_->register_module(
      "wpe", std::make_shared<Embedding>(config.block_size, config.n_embd, config.init_std, init_generator_, config.dtype));
  drop_ = transformer_->register_module("drop", std::make_shared<Dropout>(config.dropout, dropout_generator_));
  h_ = transformer_->register_module("h", std::make_shared<Sequential>());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    h_->push_back(std::make_shared<Block>(config, init_generator_, dropout_generator_));
  }
  ln_f_ = transformer_->register_module("ln_f",
                                        std::make_shared<LayerNorm>(config.n_embd, config.layer_norm_eps, config.dtype));
  if (!config.tie_weights) {
    lm_head_ = register_module("lm_head", std::make_shared<Linear>(config.n_embd, config.vocab_size, false,
                                                                    init_generator_, config.dtype));
    NoGradGuard no_grad;  // GPT-2's init, not PyTorch's Linear default
    const Tensor w = normal(lm_head_->weight().shape(), 0.0, config.init_std, config.dtype, init_generator_);
    std::copy_n(static_cast<const char*>(w.raw_data()), w.nbytes(), static_cast<char*>(lm_head_->weight().raw_data()));
  }
  CategoryGuard constant(MemoryCategory::Data);
  positions_ = arange(config.block_size);
}

GPTOutput GPT::forward(const Tensor& ids, const Tensor& targets) {
  REMAT_CHECK(ids.dim() == 2 && ids.dtype() == DType::Int64, "GPT: ids must be int64 (B, T), got {}", ids.str());
  const int64_t T = ids.size(1);
  REMAT_CHECK(T >= 1 && T <= config_.block_size, "GPT: sequence length {} is outside [1, block_size {}]", T,
              config_.block_size);
  const auto recording = record_forward();
  const ModuleScope scope = name_scope();
  if (positions_.device() != ids.device() && !MetaScope::active()) {  // a model moved with Module::to
    CategoryGuard constant(MemoryCategory::Data);
    positions_ = remat::to(arange(config_.block_size), ids.device());
  }
  Tensor x = add(wte_->forward(ids), wpe_->forward(slice(positions_, 0, 0, T)));  // (B, T, C)
  x = drop_->forward(x);
  for (size_t i = 0; i < h_->size(); ++i) {
    BlockScope block(fmt::format("transformer.h.{}", i));
    x = (*h_)[i]->forward(x);
  }
  x = ln_f_->forward(x);
  GPTOutput out;
  out.logits = lm_head_ ? lm_head_->forward(x) : linear(x, wte_->weight());  // (B, T, V)
  x = Tensor();  // ln_f's output, not held through the loss
  if (targets.defined()) out.loss = cross_entropy(out.logits, targets);
  return out;
}

std::vector<int64_t> GPT::generate(std::vector<int64_t> ids, int64_t max_new_tokens, double temperature,
                                   Generator& generator) {
  return generate_tokens(*this, std::move(ids), max_new_tokens, config_.block_size, temperature, generator,
                         "GPT.generate");
}

}  // namespace remat::nn
