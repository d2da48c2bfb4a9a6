// Hugging Face Llama folders; see llama_pretrained.h.
#include "nn/llama_pretrained.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/file_write.h"
#include "nn/safetensors.h"

namespace remat::nn {
namespace fs = std::filesystem;
namespace {

constexpr const char* kConfig = "config.json";
constexpr const char* kWeights = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

nlohmann::json read_json(const fs::path& path, const std::string& folder) {
  std::ifstream file(path);
  REMAT_CHECK(file.good(), "Llama folder '{}': '{}' cannot be read (missing, or not a file)", folder, path.string());
  std::stringstream text;
  text << file.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  REMAT_CHECK(!j.is_discarded() && j.is_object(), "Llama folder '{}': '{}' is not a JSON object", folder,
              path.string());
  return j;
}

// "model-00002-of-00005.safetensors": shard i (from 1) of n, as transformers names them.
std::string shard_name(size_t i, size_t n) { return fmt::format("model-{:05d}-of-{:05d}.safetensors", i, n); }

bool is_shard_name(const std::string& name) {
  static const std::regex pattern(R"(model-\d{5}-of-\d{5}\.safetensors)");
  return std::regex_match(name, pattern);
}

// config.json's text, as LlamaConfig.to_json_string writes the keys
// transformers reads (token ids left to its defaults).
std::string config_json(const LlamaConfig& c) {
  const nlohmann::ordered_json config{
      {"architectures", {"LlamaForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"head_dim", c.head_dim()},
      {"hidden_act", "silu"},
      {"hidden_size", c.hidden_size},
      {"initializer_range", c.initializer_range},
      {"intermediate_size", c.intermediate_size},
      {"max_position_embeddings", c.max_position_embeddings},
      {"mlp_bias", false},
      {"model_type", "llama"},
      {"num_attention_heads", c.num_attention_heads},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_key_value_heads", c.kv_heads()},
      {"pretraining_tp", 1},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_scaling", nullptr},
      {"rope_theta", c.rope_theta},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"torch_dtype", c.dtype == DType::Float64 ? "float64" : "float32"},
      {"use_cache", true},
      {"vocab_size", c.vocab_size}};
  return config.dump(2) + "\n";
}

// The parameter a file's tensor goes to: its name, with "model." added to a
// LlamaModel's names ("layers.0..."); "" for what is not a parameter here
// (a tied head, rotary buffers of older files).
std::string parameter_of(const std::string& name, bool tied) {
  if (name.ends_with(".rotary_emb.inv_freq")) return "";
  if (name == "lm_head.weight") return tied ? "" : name;
  return name.starts_with("model.") ? name : "model." + name;
}

// The shard files of FOLDER's index, in the order the index first names
// them, checked against their headers: every shard there, holding exactly
// the tensors the index maps to it.
std::vector<std::string> shards_of_index(const std::string& folder) {
  const fs::path index_path = fs::path(folder) / kIndex;
  const nlohmann::json index = read_json(index_path, folder);
  REMAT_CHECK(index.contains("weight_map") && index["weight_map"].is_object() && !index["weight_map"].empty(),
              "Llama folder '{}': '{}' has no weight_map (an object of tensor name: shard file)", folder,
              index_path.string());
  std::vector<std::string> shards;
  std::map<std::string, std::set<std::string>> names_of;  // shard -> the tensors the index maps to it
  for (const auto& [name, file] : index["weight_map"].items()) {
    REMAT_CHECK(file.is_string(), "Llama folder '{}': '{}' maps '{}' to {}, not a file name", folder,
                index_path.string(), name, file.dump());
    const std::string shard = file.get<std::string>();
    REMAT_CHECK(fs::path(shard).filename() == shard, "Llama folder '{}': '{}' maps '{}' to '{}', which is not a file "
                "of the folder", folder, index_path.string(), name, shard);
    if (!names_of.contains(shard)) {
      REMAT_CHECK(fs::is_regular_file(fs::path(folder) / shard), "Llama folder '{}': '{}' maps '{}' to shard '{}', "
                  "which is missing", folder, index_path.string(), name, shard);
      shards.push_back(shard);
    }
    names_of[shard].insert(name);
  }
  for (const std::string& shard : shards) {
    const std::string path = (fs::path(folder) / shard).string();
    std::set<std::string> held;
    for (const SafetensorsEntry& entry : read_safetensors_header(path)) {
      REMAT_CHECK(names_of[shard].contains(entry.name), "Llama folder '{}': shard '{}' holds '{}', which '{}' does "
                  "not map to it", folder, path, entry.name, index_path.string());
      held.insert(entry.name);
    }
    for (const std::string& name : names_of[shard]) {
      REMAT_CHECK(held.contains(name), "Llama folder '{}': '{}' maps '{}' to shard '{}', which does not hold it",
                  folder, index_path.string(), name, path);
    }
  }
  return shards;
}

// The folder's weight files, of earlier saves: model.safetensors, the
// index and shards.
std::vector<std::string> weight_files_in(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name == kWeights || name == kIndex || is_shard_name(name)) names.push_back(name);
  }
  return names;
}

}  // namespace

LlamaConfig load_llama_config(const std::string& folder, DType dtype, uint64_t seed) {
  const fs::path path = fs::path(folder) / kConfig;
  const std::string file = path.string();
  const nlohmann::json j = read_json(path, folder);
  // A key's value, or `fallback` (HF's default) where it is absent or null.
  const auto field = [&](const char* name, auto fallback) {
    using T = decltype(fallback);
    if (!j.contains(name) || j[name].is_null()) return fallback;
    const nlohmann::json& value = j[name];
    const bool ok = std::is_same_v<T, bool> ? value.is_boolean()
                    : std::is_integral_v<T> ? value.is_number_integer()
                    : std::is_same_v<T, std::string> ? value.is_string()
                                                     : value.is_number();
    REMAT_CHECK(ok, "Llama config '{}': {} is {}, not a value of its type", file, name, value.dump());
    return value.get<T>();
  };
  const std::string type = field("model_type", std::string("llama"));
  REMAT_CHECK(type == "llama", "Llama config '{}': model_type is '{}', not llama", file, type);
  if (j.contains("architectures") && !j["architectures"].is_null()) {
    const nlohmann::json& architectures = j["architectures"];
    bool causal = false;
    for (const nlohmann::json& a : architectures) causal = causal || a == "LlamaForCausalLM";
    REMAT_CHECK(architectures.is_array() && causal, "Llama config '{}': architectures is {}; remat's Llama is "
                "LlamaForCausalLM", file, architectures.dump());
  }
  const LlamaConfig defaults;
  LlamaConfig c;
  c.vocab_size = field("vocab_size", defaults.vocab_size);
  c.hidden_size = field("hidden_size", defaults.hidden_size);
  c.intermediate_size = field("intermediate_size", defaults.intermediate_size);
  c.num_hidden_layers = field("num_hidden_layers", defaults.num_hidden_layers);
  c.num_attention_heads = field("num_attention_heads", defaults.num_attention_heads);
  c.num_key_value_heads = field("num_key_value_heads", c.num_attention_heads);
  c.max_position_embeddings = field("max_position_embeddings", defaults.max_position_embeddings);
  c.rope_theta = field("rope_theta", defaults.rope_theta);
  c.rms_norm_eps = field("rms_norm_eps", defaults.rms_norm_eps);
  c.tie_word_embeddings = field("tie_word_embeddings", defaults.tie_word_embeddings);
  c.initializer_range = field("initializer_range", defaults.initializer_range);
  c.dtype = dtype;
  c.seed = seed;

  // What remat's Llama does not compute: each an error naming the key.
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    REMAT_CHECK(!field(key, false), "Llama config '{}': {} is true; remat's Llama has no biases", file, key);
  }
  const std::string act = field("hidden_act", std::string("silu"));
  REMAT_CHECK(act == "silu", "Llama config '{}': hidden_act is '{}'; remat's Llama computes silu (SwiGLU) only",
              file, act);
  REMAT_CHECK(!j.contains("rope_scaling") || j["rope_scaling"].is_null(), "Llama config '{}': rope_scaling is {}; "
              "remat's Llama computes plain RoPE (rope_scaling null) only", file,
              j.contains("rope_scaling") ? j["rope_scaling"].dump() : "");
  const int64_t tp = field("pretraining_tp", int64_t{1});
  REMAT_CHECK(tp == 1, "Llama config '{}': pretraining_tp is {}; remat's Llama computes the unsplit projections "
              "(pretraining_tp 1) only", file, tp);
  const double attention_dropout = field("attention_dropout", 0.0);
  REMAT_CHECK(attention_dropout == 0, "Llama config '{}': attention_dropout is {}; remat's Llama has no dropout",
              file, attention_dropout);

  // Values out of range, named by key here rather than by the constructor.
  REMAT_CHECK(c.vocab_size >= 1 && c.hidden_size >= 1 && c.intermediate_size >= 1 && c.num_hidden_layers >= 1 &&
                  c.num_attention_heads >= 1 && c.num_key_value_heads >= 1 && c.max_position_embeddings >= 1,
              "Llama config '{}': vocab_size {}, hidden_size {}, intermediate_size {}, num_hidden_layers {}, "
              "num_attention_heads {}, num_key_value_heads {} and max_position_embeddings {} must be at least 1", file,
              c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads,
              c.num_key_value_heads, c.max_position_embeddings);
  REMAT_CHECK(c.hidden_size % c.num_attention_heads == 0, "Llama config '{}': hidden_size {} is not a multiple of "
              "num_attention_heads {}", file, c.hidden_size, c.num_attention_heads);
  REMAT_CHECK(c.num_attention_heads % c.num_key_value_heads == 0, "Llama config '{}': num_key_value_heads {} does "
              "not divide num_attention_heads {}", file, c.num_key_value_heads, c.num_attention_heads);
  const int64_t head_dim = field("head_dim", c.head_dim());
  REMAT_CHECK(head_dim == c.head_dim(), "Llama config '{}': head_dim is {}; remat's Llama has head_dim = "
              "hidden_size / num_attention_heads = {}", file, head_dim, c.head_dim());
  REMAT_CHECK(c.head_dim() % 2 == 0, "Llama config '{}': head_dim {} is odd; rotary embeddings need it even", file,
              c.head_dim());
  REMAT_CHECK(std::isfinite(c.rope_theta) && c.rope_theta > 0, "Llama config '{}': rope_theta is {}; it must be "
              "finite and > 0 (Llama's is 10000)", file, c.rope_theta);
  REMAT_CHECK(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0, "Llama config '{}': rms_norm_eps is {}; it must "
              "be finite and > 0 (Llama's is 1e-05 or 1e-06)", file, c.rms_norm_eps);
  REMAT_CHECK(std::isfinite(c.initializer_range) && c.initializer_range >= 0, "Llama config '{}': "
              "initializer_range is {}; it is a standard deviation, finite and >= 0 (Llama's is 0.02)", file,
              c.initializer_range);
  REMAT_CHECK(dtype == DType::Float32 || dtype == DType::Float64, "Llama folder '{}': the model's dtype must be "
              "float32 or float64, got {}", folder, dtype_name(dtype));
  return c;
}

void load_llama_weights(Llama& model, const std::string& folder) {
  const fs::path single = fs::path(folder) / kWeights;
  std::vector<std::string> paths;
  if (fs::is_regular_file(single)) {  // transformers too reads model.safetensors first
    paths.push_back(single.string());
  } else {
    REMAT_CHECK(fs::is_regular_file(fs::path(folder) / kIndex), "Llama folder '{}': neither {} nor {} is there",
                folder, kWeights, kIndex);
    for (const std::string& shard : shards_of_index(folder)) paths.push_back((fs::path(folder) / shard).string());
  }
  const bool tied = model.config().tie_word_embeddings;
  try {
    load_safetensors(model, paths, {.rename = [tied](const std::string& name) { return parameter_of(name, tied); },
                                    .widen = true});
  } catch (const Error& e) {
    REMAT_FAIL("Llama folder '{}': {}", folder, e.what());
  }
}

std::unique_ptr<Llama> load_llama_pretrained(const std::string& folder, DType dtype, uint64_t seed) {
  auto model = std::make_unique<Llama>(load_llama_config(folder, dtype, seed));
  load_llama_weights(*model, folder);
  return model;
}

void save_llama_pretrained(const Llama& model, const std::string& folder, int64_t max_shard_bytes) {
  REMAT_CHECK(max_shard_bytes > 0, "save_llama_pretrained '{}': max_shard_bytes must be positive, got {}", folder,
              max_shard_bytes);
  std::error_code error;
  fs::create_directories(folder, error);
  REMAT_CHECK(!error && fs::is_directory(folder), "save_llama_pretrained: '{}' cannot be made ({})", folder,
              error ? error.message() : "not a folder");
  // Shards as transformers (huggingface_hub) cuts them: tensors in order, a
  // new shard when the next would pass the limit, a tensor above the limit
  // alone in a shard of its own, listed when it is met.
  using Shard = std::vector<std::pair<std::string, Tensor>>;
  std::vector<Shard> shards;
  Shard current;
  int64_t filled = 0, total = 0;
  for (const auto& [name, tensor] : model.named_parameters()) {
    const int64_t bytes = tensor.nbytes();
    total += bytes;
    if (bytes > max_shard_bytes) {
      shards.push_back({{name, tensor}});
      continue;
    }
    if (filled + bytes > max_shard_bytes) {
      shards.push_back(std::move(current));
      current.clear();
      filled = 0;
    }
    current.emplace_back(name, tensor);
    filled += bytes;
  }
  if (!current.empty()) shards.push_back(std::move(current));
  const SafetensorsMetadata metadata{{"format", "pt"}};
  // Every file's bytes first, into its temporary (a full disk fails here,
  // before any name changes: config.json's, the weights', the index's), then
  // the weights' names, the index's, and config.json's last: a config.json
  // beside the weights says the folder is whole (Note [Whole or not at all]).
  AtomicFile config((fs::path(folder) / kConfig).string());
  config.write(config_json(model.config()));
  std::vector<std::unique_ptr<AtomicFile>> weights;
  std::set<std::string> written;
  nlohmann::json index{{"metadata", {{"total_size", total}}}, {"weight_map", nlohmann::json::object()}};
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = shards.size() == 1 ? kWeights : shard_name(i + 1, shards.size());
    weights.push_back(std::make_unique<AtomicFile>((fs::path(folder) / name).string()));
    write_safetensors(*weights.back(), shards[i], metadata);
    for (const auto& [tensor, value] : shards[i]) index["weight_map"][tensor] = name;  // sorted, as transformers'
    written.insert(name);
  }
  if (shards.size() > 1) {
    weights.push_back(std::make_unique<AtomicFile>((fs::path(folder) / kIndex).string()));
    weights.back()->write(index.dump(2) + "\n");
    written.insert(kIndex);
  }
  for (const std::unique_ptr<AtomicFile>& file : weights) file->commit();
  // An earlier save's weight files that this one did not write would be
  // read in its place (model.safetensors before an index) or beside it.
  for (const std::string& name : weight_files_in(folder)) {
    if (!written.contains(name)) fs::remove(fs::path(folder) / name, error);
    REMAT_CHECK(!error, "save_llama_pretrained '{}': the earlier save's '{}' cannot be removed ({})", folder, name,
                error.message());
  }
  config.commit();
}

}  // namespace remat::nn
