// Hugging Face GPT-2 directories; see gpt2_pretrained.h.
#include "nn/gpt2_pretrained.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/file_write.h"

namespace remat::nn {
namespace fs = std::filesystem;
namespace {

constexpr const char* kConfig = "config.json";
constexpr const char* kWeights = "model.safetensors";

nlohmann::json read_json(const fs::path& path) {
  std::ifstream file(path);
  REMAT_CHECK(file.good(), "GPT-2 directory: '{}' cannot be read (missing, or not a file)", path.string());
  std::stringstream text;
  text << file.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  REMAT_CHECK(!j.is_discarded() && j.is_object(), "GPT-2 directory: '{}' is not a JSON object", path.string());
  return j;
}

// config.json's text, as GPT2Config writes it.
std::string config_json(const GPTConfig& c) {
  const nlohmann::ordered_json config{
      {"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"vocab_size", c.vocab_size},
      {"n_positions", c.block_size}, {"n_ctx", c.block_size}, {"n_embd", c.n_embd}, {"n_layer", c.n_layer},
      {"n_head", c.n_head}, {"n_inner", nullptr}, {"activation_function", "gelu_new"}, {"resid_pdrop", c.dropout},
      {"embd_pdrop", c.dropout}, {"attn_pdrop", c.dropout}, {"layer_norm_epsilon", c.layer_norm_eps},
      {"initializer_range", c.init_std}, {"tie_word_embeddings", c.tie_weights},
      {"torch_dtype", c.dtype == DType::Float64 ? "float64" : "float32"}};
  return config.dump(2) + "\n";
}

}  // namespace

GPTConfig load_gpt2_config(const std::string& dir, uint64_t seed) {
  const fs::path path = fs::path(dir) / kConfig;
  const nlohmann::json j = read_json(path);
  const auto field = [&](const char* name, auto fallback) {
    using T = decltype(fallback);
    if (!j.contains(name) || j[name].is_null()) return fallback;
    const nlohmann::json& value = j[name];
    const bool ok = std::is_same_v<T, bool> ? value.is_boolean()
                    : std::is_integral_v<T> ? value.is_number_integer()
                    : std::is_same_v<T, std::string> ? value.is_string()
                                                     : value.is_number();
    REMAT_CHECK(ok, "GPT-2 config '{}': {} is {}, not a value of its type", path.string(), name, value.dump());
    return value.get<T>();
  };
  const auto required = [&](const char* name) {
    REMAT_CHECK(j.contains(name) && j[name].is_number_integer(), "GPT-2 config '{}': {} is missing or not an "
                "integer", path.string(), name);
    return j[name].get<int64_t>();
  };
  const std::string type = field("model_type", std::string("gpt2"));
  REMAT_CHECK(type == "gpt2", "GPT-2 config '{}': model_type is '{}', not gpt2", path.string(), type);
  GPTConfig config{.vocab_size = required("vocab_size"), .block_size = required("n_positions"),
                   .n_layer = required("n_layer"), .n_head = required("n_head"), .n_embd = required("n_embd")};
  config.layer_norm_eps = field("layer_norm_epsilon", 1e-5);
  config.init_std = field("initializer_range", 0.02);
  config.tie_weights = field("tie_word_embeddings", true);
  config.seed = seed;
  const std::string dtype = field("torch_dtype", std::string("float32"));
  REMAT_CHECK(dtype == "float32" || dtype == "float64", "GPT-2 config '{}': torch_dtype is '{}'; remat's GPT "
              "computes in float32 or float64", path.string(), dtype);
  config.dtype = dtype == "float64" ? DType::Float64 : DType::Float32;
  const std::string activation = field("activation_function", std::string("gelu_new"));
  REMAT_CHECK(activation == "gelu_new", "GPT-2 config '{}': activation_function is '{}'; remat's GPT computes "
              "gelu_new (the tanh approximation) only", path.string(), activation);
  const int64_t inner = field("n_inner", int64_t{4} * config.n_embd);
  REMAT_CHECK(inner == 4 * config.n_embd, "GPT-2 config '{}': n_inner is {}; remat's GPT has 4 x n_embd = {}",
              path.string(), inner, 4 * config.n_embd);
  for (const char* flag : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"}) {
    REMAT_CHECK(!field(flag, false), "GPT-2 config '{}': {} is true; remat's GPT does not compute that variant",
                path.string(), flag);
  }
  REMAT_CHECK(field("scale_attn_weights", true), "GPT-2 config '{}': scale_attn_weights is false; remat's GPT "
              "scales attention by 1/sqrt(head size)", path.string());
  // GPT2Config's defaults are 0.1; remat's GPT has one probability for all three.
  const double resid = field("resid_pdrop", 0.1), embd = field("embd_pdrop", 0.1), attn = field("attn_pdrop", 0.1);
  REMAT_CHECK(resid == embd && embd == attn, "GPT-2 config '{}': resid_pdrop {}, embd_pdrop {} and attn_pdrop {} "
              "differ; remat's GPT has one dropout probability for all three", path.string(), resid, embd, attn);
  config.dropout = resid;
  REMAT_CHECK(config.n_layer >= 1 && config.n_head >= 1 && config.n_embd >= 1 && config.block_size >= 1 &&
                  config.vocab_size >= 1,
              "GPT-2 config '{}': n_layer, n_head, n_embd, n_positions and vocab_size must be at least 1, got {}, {}, "
              "{}, {} and {}", path.string(), config.n_layer, config.n_head, config.n_embd, config.block_size,
              config.vocab_size);
  REMAT_CHECK(config.n_embd % config.n_head == 0, "GPT-2 config '{}': n_embd {} is not a multiple of n_head {}",
              path.string(), config.n_embd, config.n_head);
  REMAT_CHECK(config.dropout >= 0 && config.dropout < 1, "GPT-2 config '{}': the dropout probability {} is outside "
              "[0, 1)", path.string(), config.dropout);
  // Checked here rather than by LayerNorm and the initialisers, so that the
  // error names the file and the key a user edits.
  REMAT_CHECK(std::isfinite(config.layer_norm_eps) && config.layer_norm_eps > 0, "GPT-2 config '{}': "
              "layer_norm_epsilon is {}; LayerNorm needs a finite eps > 0 (GPT-2's is 1e-05)", path.string(),
              config.layer_norm_eps);
  REMAT_CHECK(std::isfinite(config.init_std) && config.init_std >= 0, "GPT-2 config '{}': initializer_range is {}; "
              "it is a standard deviation, finite and >= 0 (GPT-2's is 0.02)", path.string(), config.init_std);
  return config;
}

void load_gpt2_weights(GPT& model, const std::string& dir) {
  const bool tied = model.config().tie_weights;
  load_safetensors(model, (fs::path(dir) / kWeights).string(), {.rename = [tied](const std::string& name) {
    if (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")) return std::string();  // buffers
    if (name == "lm_head.weight") return tied ? std::string() : name;  // a tied head is the embedding
    return name.starts_with("transformer.") ? name : "transformer." + name;
  }});
}

void save_gpt2_pretrained(const GPT& model, const std::string& dir, SafetensorsMetadata metadata) {
  std::error_code error;
  fs::create_directories(dir, error);
  REMAT_CHECK(!error && fs::is_directory(dir), "save_gpt2_pretrained: '{}' cannot be made ({})", dir,
              error ? error.message() : "not a folder");
  metadata["format"] = "pt";
  // config.json's bytes first, into its temporary (a full disk fails here,
  // before the weights change), then the weights, then config.json's name:
  // a config.json beside the weights says the folder is whole, and never
  // one of another model's (Note [Whole or not at all]).
  AtomicFile config((fs::path(dir) / kConfig).string());
  config.write(config_json(model.config()));
  save_safetensors(model, (fs::path(dir) / kWeights).string(), metadata);
  config.commit();
}

int64_t gpt2_pretrained_bytes(const GPT& model, const SafetensorsMetadata& metadata) {
  // The header, entry by entry: "name":{"dtype":"F32","shape":[..],"data_offsets":[a,b]},
  // with at most 21 characters a number; a metadata value's character at
  // most 6 once escaped (\u00XX).
  int64_t bytes = 8 + 64 + 7;  // the header's length, braces and "format":"pt", its padding
  for (const auto& [name, tensor] : model.named_parameters()) {
    bytes += tensor.nbytes() + static_cast<int64_t>(name.size()) + 64 + 21 * (tensor.dim() + 2);
  }
  for (const auto& [key, value] : metadata) bytes += 6 * static_cast<int64_t>(key.size() + value.size()) + 8;
  return bytes + static_cast<int64_t>(config_json(model.config()).size());
}

}  // namespace remat::nn
