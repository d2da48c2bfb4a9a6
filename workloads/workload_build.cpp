// The workloads built; see workload_build.h. The checks of a run's options
// are here too, because every run builds its workload first.
#include "workloads/workload_build.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/factory.h"
#include "engine/meta.h"
#include "kernels/cpu/parallel.h"
#include "nn/gpt.h"
#include "nn/gpt2_pretrained.h"
#include "nn/llama.h"
#include "nn/llama_pretrained.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "train/limits.h"
#include "train/run_files.h"

namespace remat::workloads {

using namespace remat::train;  // the Trainer, its arguments and its checks
namespace {

// W1: 15 x [Linear(1024, 1024) + ReLU] + Linear(1024, 10); batch 256.
Workload build_w1(Generator& generator, Device device) {
  constexpr int64_t kWidth = 1024, kHidden = 15, kClasses = 10, kBatch = 256;
  std::vector<int64_t> sizes(kHidden + 1, kWidth);
  sizes.push_back(kClasses);
  auto model = std::make_shared<nn::MLP>(sizes, generator);
  model->to(device);
  const Tensor inputs = to(normal({kBatch, kWidth}, 0.0, 1.0, DType::Float32, generator), device);
  const Tensor targets = to(randint(kClasses, {kBatch}, generator), device);
  return {model, [=] { return cross_entropy(model->forward(inputs), targets); }};
}

// W2: GPT-mini (vocabulary 256, context 128, 6 blocks, d_model 256, 4 heads,
// untied head, dropout 0); batch 16 of random tokens.
Workload build_w2(uint64_t seed, Device device, nn::AttentionPath attention, nn::MlpPath mlp) {
  const nn::GPTConfig config{.vocab_size = 256, .block_size = 128, .n_layer = 6, .n_head = 4, .n_embd = 256,
                             .dropout = 0.0, .tie_weights = false, .seed = seed, .attention = attention,
                             .mlp = mlp};
  auto model = std::make_shared<nn::GPT>(config);
  Generator generator(seed + 2);
  model->to(device);
  const Tensor ids = to(randint(config.vocab_size, {16, config.block_size}, generator), device);
  const Tensor targets = to(randint(config.vocab_size, {16, config.block_size}, generator), device);
  return {model, [=] { return model->forward(ids, targets).loss; }};
}

// W3: GPT-2 small (124M: vocabulary 50257, context 1024, 12 blocks, d_model
// 768, 12 heads, tied head, dropout 0); batch 8 of random tokens; AdamW. A
// GPU workload (a CPU step takes minutes).
Workload build_w3(uint64_t seed, Device device, nn::AttentionPath attention, nn::MlpPath mlp) {
  const nn::GPTConfig config{.vocab_size = 50257, .block_size = 1024, .n_layer = 12, .n_head = 12, .n_embd = 768,
                             .dropout = 0.0, .tie_weights = true, .seed = seed, .attention = attention,
                             .mlp = mlp};
  auto model = std::make_shared<nn::GPT>(config);
  model->to(device);
  Generator generator(seed + 2);
  const Tensor ids = to(randint(config.vocab_size, {8, config.block_size}, generator), device);
  const Tensor targets = to(randint(config.vocab_size, {8, config.block_size}, generator), device);
  return {model, [=] { return model->forward(ids, targets).loss; }, true, 6e-4};
}

// AdamW's learning rate for every Llama (bench/torch_llama.py's).
constexpr double kLlamaLr = 3e-4;

// A Llama of `config` (or of hf_dir's config.json and weights) on a fixed
// batch of random tokens, AdamW. `meta`: built on the meta device, to be
// rehearsed (no values, no weights read).
Workload build_llama(nn::LlamaConfig config, const std::string& hf_dir, int64_t batch, uint64_t seed, Device device,
                     bool meta, nn::MlpPath mlp) {
  if (!hf_dir.empty()) config = nn::load_llama_config(hf_dir, DType::Float32, seed);
  config.seed = seed;
  config.fused_mlp = mlp == nn::MlpPath::Fused;
  std::optional<MetaScope> scope;
  if (meta) scope.emplace();
  auto model = std::make_shared<nn::Llama>(config);
  if (!meta) {
    if (!hf_dir.empty()) nn::load_llama_weights(*model, hf_dir);
    model->to(device);
  }
  Generator generator(seed + 2);
  const int64_t T = config.max_position_embeddings;
  const Tensor ids = to(randint(config.vocab_size, {batch, T}, generator), device);
  const Tensor targets = to(randint(config.vocab_size, {batch, T}, generator), device);
  return {model, [=] { return model->forward(ids, targets).loss; }, true, kLlamaLr};
}

}  // namespace

std::string hf_model_type(const std::string& folder) {
  std::ifstream file(std::filesystem::path(folder) / "config.json");
  if (!file) return "";
  const nlohmann::json j = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>()
                                                                                  : "";
}

namespace {

// A model of the user's (ModelSpec), on a fixed random batch; `meta`: see
// build_llama.
Workload build_spec(const ModelSpec& spec, uint64_t seed, Device device, bool meta) {
  if (spec.kind == "llama") return build_llama(spec.llama, "", spec.batch_size, seed, device, meta, spec.mlp);
  if (spec.kind == "hf" && hf_model_type(spec.hf_dir) == "llama") {
    REMAT_CHECK(spec.attention == nn::AttentionPath::Fused, "bench: --hf '{}' is a Llama, which runs the fused "
                "attention only (--attention explicit is a GPT's)", spec.hf_dir);
    return build_llama({}, spec.hf_dir, spec.batch_size, seed, device, meta, spec.mlp);
  }
  Generator generator(seed + 2);
  if (spec.kind == "mlp") {
    Generator init(seed);
    auto model = std::make_shared<nn::MLP>(spec.dims, init);
    model->to(device);
    const Tensor inputs = to(normal({spec.batch_size, spec.dims.front()}, 0.0, 1.0, DType::Float32, generator), device);
    const Tensor targets = to(randint(spec.dims.back(), {spec.batch_size}, generator), device);
    return {model, [=] { return cross_entropy(model->forward(inputs), targets); }};
  }
  nn::GPTConfig config = spec.gpt;
  config.seed = seed;
  if (spec.kind == "hf") config = nn::load_gpt2_config(spec.hf_dir, seed);
  config.attention = spec.attention;
  config.mlp = spec.mlp;
  auto model = std::make_shared<nn::GPT>(config);
  if (spec.kind == "hf") nn::load_gpt2_weights(*model, spec.hf_dir);
  model->to(device);
  const Tensor ids = to(randint(config.vocab_size, {spec.batch_size, config.block_size}, generator), device);
  const Tensor targets = to(randint(config.vocab_size, {spec.batch_size, config.block_size}, generator), device);
  return {model, [=] { return model->forward(ids, targets).loss; }};
}

void check_spec(const ModelSpec& spec) {
  REMAT_CHECK(spec.kind == "gpt" || spec.kind == "llama" || spec.kind == "mlp" || spec.kind == "hf", "bench: unknown "
              "--model '{}' (available: gpt, llama, mlp, or --hf DIR)", spec.kind);
  REMAT_CHECK(spec.batch_size >= 1, "bench: --batch-size must be at least 1, got {}", spec.batch_size);
  if (spec.kind == "mlp") {
    REMAT_CHECK(spec.dims.size() >= 2, "bench: --dims needs at least an input and an output width, got {} width(s)",
                spec.dims.size());
    for (const int64_t width : spec.dims) REMAT_CHECK(width >= 1, "bench: --dims widths must be at least 1, got {}", width);
  }
  if (spec.kind == "gpt") {
    const nn::GPTConfig& c = spec.gpt;
    REMAT_CHECK(c.n_layer >= 1 && c.n_head >= 1 && c.n_embd >= 1 && c.block_size >= 1 && c.vocab_size >= 1,
                "bench: --n-layer, --n-head, --n-embd, --block-size and --vocab-size must be at least 1, got {}, {}, "
                "{}, {} and {}", c.n_layer, c.n_head, c.n_embd, c.block_size, c.vocab_size);
    REMAT_CHECK(c.n_embd % c.n_head == 0, "bench: --n-embd {} must be a multiple of --n-head {}", c.n_embd, c.n_head);
    REMAT_CHECK(c.dropout >= 0 && c.dropout < 1, "bench: --dropout must be in [0, 1), got {}", c.dropout);
  }
  if (spec.kind == "llama") {
    const nn::LlamaConfig& c = spec.llama;
    REMAT_CHECK(c.num_hidden_layers >= 1 && c.num_attention_heads >= 1 && c.num_key_value_heads >= 1 &&
                    c.hidden_size >= 1 && c.intermediate_size >= 1 && c.max_position_embeddings >= 1 &&
                    c.vocab_size >= 1,
                "bench: --n-layer, --n-head, --n-kv-head, --n-embd, --intermediate-size, --block-size and "
                "--vocab-size must be at least 1, got {}, {}, {}, {}, {}, {} and {}", c.num_hidden_layers,
                c.num_attention_heads, c.num_key_value_heads, c.hidden_size, c.intermediate_size,
                c.max_position_embeddings, c.vocab_size);
    REMAT_CHECK(c.hidden_size % c.num_attention_heads == 0, "bench: --n-embd {} must be a multiple of --n-head {}",
                c.hidden_size, c.num_attention_heads);
    REMAT_CHECK(c.num_attention_heads % c.num_key_value_heads == 0, "bench: --n-kv-head {} must divide --n-head {} "
                "(each kv head serves a group of query heads)", c.num_key_value_heads, c.num_attention_heads);
    REMAT_CHECK(c.head_dim() % 2 == 0, "bench: the head size --n-embd / --n-head = {} / {} = {} must be even (RoPE "
                "rotates pairs of channels)", c.hidden_size, c.num_attention_heads, c.head_dim());
    REMAT_CHECK(std::isfinite(c.rope_theta) && c.rope_theta > 0, "bench: --rope-theta must be finite and above 0, "
                "got {}", c.rope_theta);
    REMAT_CHECK(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0, "bench: --rms-norm-eps must be finite and "
                "above 0, got {}", c.rms_norm_eps);
  }
}

// `rehearsal`: the workload is rehearsed on the meta device, not run
// (plan_workload with --device meta).
void check_options(const WorkloadOptions& options, bool rehearsal) {
  if (!options.model.kind.empty()) {
    check_spec(options.model);
  } else {
    const std::string& w = options.workload;
    REMAT_CHECK(w == "W1" || w == "W2" || w == "W3" || w == "W4" || w == "W5", "bench: unknown workload '{}' "
                "(available: W1, W2, W3, W4, W5, or --model gpt|llama|mlp, --hf DIR)", w);
    REMAT_CHECK((w != "W3" && w != "W5") || rehearsal || device_from_name(options.device).is_cuda(), "bench: {} "
                "({}) is a GPU workload: give --device cuda (on the CPU a step takes minutes), or explain --device "
                "meta to plan it without running it", w, w == "W3" ? "GPT-2 124M" : "Llama at 1B shape");
    REMAT_CHECK(options.model.attention == nn::AttentionPath::Fused || w == "W1" || w == "W2" || w == "W3",
                "bench: {} is a Llama, which runs the fused attention only (--attention explicit is a GPT's)", w);
  }
  scheduler::check_policy(options.policy);  // an unknown name is an error that lists the known ones
  check_threads(options.threads, "bench");
  REMAT_CHECK(options.steps >= 1 && options.warmup >= 0, "bench: need steps >= 1 and warmup >= 0, got {} and {}",
              options.steps, options.warmup);
  REMAT_CHECK(rehearsal || !device_from_name(options.device).is_meta(), "bench: --device meta: a workload on the "
              "meta device computes no loss to report (meta tensors have shapes and bytes only; explain plans one)");
  check_output_path(options.save_profile_path, "--save-profile");
  check_output_path(options.trace_path, "--trace");  // found now, not after the steps
  // The profile of a step that ran: the first plans from a rehearsal or is
  // profiled, and its times are planned from after it.
  REMAT_CHECK(options.save_profile_path.empty() || options.warmup + options.steps >= 2, "bench: --save-profile needs "
              "two steps or more (--warmup + --steps), got {}", options.warmup + options.steps);
  check_distinct_paths({{"--profile", options.profile_path}, {"--save-profile", options.save_profile_path},
                        {"--trace", options.trace_path}});
}

}  // namespace

ModelSpec llama_workload(const std::string& workload) {
  ModelSpec spec;
  spec.kind = "llama";  // ModelSpec's defaults are W4's sizes
  spec.batch_size = 8;
  if (workload == "W4") return spec;
  REMAT_CHECK(workload == "W5", "llama_workload: '{}' is not a Llama workload (W4, W5)", workload);
  spec.llama = {.vocab_size = 128256, .hidden_size = 2048, .intermediate_size = 8192, .num_hidden_layers = 16,
                .num_attention_heads = 32, .num_key_value_heads = 8, .max_position_embeddings = 2048,
                .rope_theta = 500000.0, .rms_norm_eps = 1e-5, .tie_word_embeddings = true};
  spec.batch_size = 4;
  return spec;
}

std::unique_ptr<optim::Optimizer> optimizer_for(const Workload& workload) {
  if (workload.adamw) {
    return std::make_unique<optim::AdamW>(workload.model->parameters(), optim::AdamWOptions{.lr = workload.lr});
  }
  return std::make_unique<optim::SGD>(workload.model->parameters(), optim::SGDOptions{.lr = workload.lr});
}

int64_t optimizer_state_bytes(const Workload& workload) {
  if (!workload.adamw) return 0;
  int64_t bytes = 0;
  for (const Tensor& p : workload.model->parameters()) bytes += 2 * static_cast<int64_t>(p.nbytes());
  return bytes;
}

Workload build_workload(const WorkloadOptions& options, bool rehearsal) {
  check_options(options, rehearsal);
  kernels::cpu::set_num_threads(options.threads);
  Generator generator(options.seed);
  const Device device = device_from_name(options.device);
  if (!options.model.kind.empty()) return build_spec(options.model, options.seed, device, rehearsal);
  if (options.workload == "W4" || options.workload == "W5") {
    ModelSpec spec = llama_workload(options.workload);
    spec.mlp = options.model.mlp;  // --mlp
    return build_spec(spec, options.seed, device, rehearsal);
  }
  if (options.workload == "W1") return build_w1(generator, device);
  return options.workload == "W2" ? build_w2(options.seed, device, options.model.attention, options.model.mlp)
                                    : build_w3(options.seed, device, options.model.attention, options.model.mlp);
}

}  // namespace remat::workloads
