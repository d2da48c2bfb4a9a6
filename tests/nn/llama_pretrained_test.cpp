// Hugging Face Llama folders (nn/llama_pretrained.h): a round trip through
// one file and through shards keeps every weight and the logits bit for
// bit; config.json has transformers' keys; bfloat16 files widen exactly;
// LlamaModel names, rotary buffers and a tied head's copy load; each defect
// of a folder (key missing or unexpected, shape, dtype, shards, config keys
// remat does not compute) is an error naming the folder, the file and the
// key; a save that fails leaves the folder as it was.
#include "nn/llama_pretrained.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/factory.h"
#include "nn/safetensors.h"
#include "tests/support/errors.h"
#include "tests/support/files.h"

namespace remat::nn {
namespace {

namespace fs = std::filesystem;
using Named = std::vector<std::pair<std::string, Tensor>>;

LlamaConfig tiny_llama(bool tied, uint64_t seed, DType dtype = DType::Float32) {
  return {.vocab_size = 19, .hidden_size = 16, .intermediate_size = 24, .num_hidden_layers = 2,
          .num_attention_heads = 4, .num_key_value_heads = 2, .max_position_embeddings = 32, .rope_theta = 5000.0,
          .rms_norm_eps = 1e-5, .tie_word_embeddings = tied, .dtype = dtype, .seed = seed};
}

std::string fresh_folder(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("remat_llama_dir_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  return dir.string();
}

using testing::read_file;

nlohmann::json json_of(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

// The logits' bytes on a fixed batch.
std::string logits_of(Llama& model) {
  Generator g(9);
  const Tensor logits = model.forward(randint(19, {2, 7}, g));
  return std::string(static_cast<const char*>(logits.raw_data()), logits.nbytes());
}

void expect_same_llama_weights(const Llama& a, const Llama& b) {
  const Named pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].first, pb[i].first);
    EXPECT_EQ(pa[i].second.to_vector<double>(), pb[i].second.to_vector<double>()) << pa[i].first;
  }
}

TEST(LlamaPretrained, ARoundTripKeepsEveryWeightAndTheLogitsBitwise) {
  for (const bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    Llama model(tiny_llama(tied, 1));
    const std::string dir = fresh_folder(tied ? "tied" : "untied");
    save_llama_pretrained(model, dir);
    EXPECT_EQ(files_in(dir), (std::set<std::string>{"config.json", "model.safetensors"}));
    const nlohmann::json config = json_of(fs::path(dir) / "config.json");
    EXPECT_EQ(config["model_type"], "llama");
    EXPECT_EQ(config["architectures"][0], "LlamaForCausalLM");
    EXPECT_EQ(config["hidden_size"], 16);
    EXPECT_EQ(config["intermediate_size"], 24);
    EXPECT_EQ(config["num_attention_heads"], 4);
    EXPECT_EQ(config["num_key_value_heads"], 2);
    EXPECT_EQ(config["head_dim"], 4);
    EXPECT_EQ(config["rope_theta"], 5000.0);
    EXPECT_EQ(config["rms_norm_eps"], 1e-5);
    EXPECT_EQ(config["tie_word_embeddings"], tied);
    EXPECT_EQ(config["hidden_act"], "silu");
    EXPECT_TRUE(config["rope_scaling"].is_null());
    EXPECT_EQ(config["torch_dtype"], "float32");
    std::set<std::string> names;
    for (const SafetensorsEntry& entry : read_safetensors_header(dir + "/model.safetensors")) names.insert(entry.name);
    EXPECT_EQ(names.contains("lm_head.weight"), !tied);  // save_pretrained writes no tied head
    EXPECT_EQ(names.size(), model.named_parameters().size());
    EXPECT_EQ(read_safetensors_metadata(dir + "/model.safetensors").at("format"), "pt");

    const LlamaConfig read = load_llama_config(dir, DType::Float32, /*seed=*/7);
    EXPECT_EQ(read.vocab_size, 19);
    EXPECT_EQ(read.num_hidden_layers, 2);
    EXPECT_EQ(read.num_key_value_heads, 2);
    EXPECT_EQ(read.max_position_embeddings, 32);
    EXPECT_EQ(read.rope_theta, 5000.0);
    EXPECT_EQ(read.rms_norm_eps, 1e-5);
    EXPECT_EQ(read.tie_word_embeddings, tied);
    EXPECT_EQ(read.seed, 7u);
    const std::unique_ptr<Llama> loaded = load_llama_pretrained(dir);
    expect_same_llama_weights(model, *loaded);
    EXPECT_EQ(logits_of(model), logits_of(*loaded));
  }
}

// Shards as transformers cuts them: in order, a new one where the next
// tensor would pass the limit; the index maps every tensor and sums their
// bytes; the model comes back bit for bit. Saving again unsharded, or
// sharded over one file, leaves no file of the earlier save.
TEST(LlamaPretrained, AShardedRoundTripKeepsTheLogitsBitwise) {
  Llama model(tiny_llama(false, 1));
  const std::string dir = fresh_folder("sharded");
  const int64_t limit = 4096;  // a (24, 16) float32 projection is 1536 bytes, the embedding 1216
  save_llama_pretrained(model, dir, limit);
  const nlohmann::json index = json_of(fs::path(dir) / "model.safetensors.index.json");
  std::set<std::string> shards;
  int64_t total = 0;
  for (const auto& [name, file] : index["weight_map"].items()) shards.insert(file.get<std::string>());
  for (const auto& [name, p] : model.named_parameters()) {
    total += p.nbytes();
    EXPECT_TRUE(index["weight_map"].contains(name)) << name;
  }
  EXPECT_EQ(index["weight_map"].size(), model.named_parameters().size());
  EXPECT_EQ(index["metadata"]["total_size"], total);
  const size_t n = shards.size();
  ASSERT_GE(n, 3u);
  std::set<std::string> expected{"config.json", "model.safetensors.index.json"};
  for (size_t i = 1; i <= n; ++i) {
    const std::string shard = fmt::format("model-{:05d}-of-{:05d}.safetensors", i, n);
    EXPECT_TRUE(shards.contains(shard)) << shard;
    expected.insert(shard);
    int64_t bytes = 0;
    for (const SafetensorsEntry& entry : read_safetensors_header(dir + "/" + shard)) {
      bytes += numel(entry.shape) * 4;
      EXPECT_EQ(index["weight_map"][entry.name], shard) << entry.name;
    }
    EXPECT_LE(bytes, limit) << shard;
  }
  EXPECT_EQ(files_in(dir), expected);
  // Tensors in order: shard i ends where adding the next tensor would pass the limit.
  int64_t filled = 0;
  std::string previous_shard;
  for (const auto& [name, p] : model.named_parameters()) {
    const std::string shard = index["weight_map"][name];
    if (!previous_shard.empty() && shard != previous_shard) { EXPECT_GT(filled + p.nbytes(), limit) << name; }
    if (shard != previous_shard) filled = 0;
    filled += p.nbytes();
    previous_shard = shard;
  }
  const std::unique_ptr<Llama> loaded = load_llama_pretrained(dir);
  EXPECT_EQ(logits_of(model), logits_of(*loaded));

  save_llama_pretrained(model, dir);  // one file now: the shards and index go
  EXPECT_EQ(files_in(dir), (std::set<std::string>{"config.json", "model.safetensors"}));
  save_llama_pretrained(model, dir, limit);  // shards again: model.safetensors goes
  EXPECT_EQ(files_in(dir), expected);
  EXPECT_EQ(logits_of(model), logits_of(*load_llama_pretrained(dir)));
}

TEST(LlamaPretrained, ATensorAboveTheLimitHasAShardOfItsOwn) {
  Llama model(tiny_llama(true, 1));
  const std::string dir = fresh_folder("big");
  save_llama_pretrained(model, dir, 1000);  // q, o, gate, up, down and the embedding pass it
  const nlohmann::json index = json_of(fs::path(dir) / "model.safetensors.index.json");
  std::map<std::string, int64_t> bytes;
  for (const auto& [name, p] : model.named_parameters()) bytes[name] = p.nbytes();
  std::map<std::string, std::vector<std::string>> held;
  for (const auto& [name, file] : index["weight_map"].items()) held[file.get<std::string>()].push_back(name);
  int64_t big = 0;
  for (const auto& [shard, names] : held) {
    for (const std::string& name : names) {
      if (bytes[name] <= 1000) continue;
      EXPECT_EQ(names.size(), 1u) << shard << " holds " << name;
      ++big;
    }
  }
  EXPECT_GE(big, 5);
  EXPECT_EQ(logits_of(model), logits_of(*load_llama_pretrained(dir)));
}

// bfloat16 of a float32 value: its upper 16 bits (the value rounded toward zero).
uint16_t bfloat16_bits(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  return static_cast<uint16_t>(bits >> 16);
}

// A folder saved in bfloat16 (torch_dtype "bfloat16", as most Llamas on the
// Hub are): loaded into float32 and float64, each value exactly the
// bfloat16's.
TEST(LlamaPretrained, Bfloat16FilesLoadExactlyIntoFloat32AndFloat64) {
  Llama model(tiny_llama(false, 1));
  const std::string dir = fresh_folder("bf16");
  save_llama_pretrained(model, dir);
  Named bf16;
  {
    NoGradGuard no_grad;
    for (const auto& [name, p] : model.named_parameters()) {
      Tensor half(p.shape(), DType::BFloat16);
      float* values = p.data<float>();
      for (int64_t i = 0; i < p.numel(); ++i) {
        static_cast<uint16_t*>(half.raw_data())[i] = bfloat16_bits(values[i]);
        const uint32_t widened = static_cast<uint32_t>(bfloat16_bits(values[i])) << 16;
        std::memcpy(&values[i], &widened, 4);  // the model now holds the bfloat16 values
      }
      bf16.emplace_back(name, half);
    }
  }
  write_safetensors(dir + "/model.safetensors", bf16, {{"format", "pt"}});
  nlohmann::json config = json_of(fs::path(dir) / "config.json");
  config["torch_dtype"] = "bfloat16";
  std::ofstream(fs::path(dir) / "config.json") << config.dump();
  const std::unique_ptr<Llama> f32 = load_llama_pretrained(dir, DType::Float32);
  expect_same_llama_weights(model, *f32);
  EXPECT_EQ(logits_of(model), logits_of(*f32));
  const std::unique_ptr<Llama> f64 = load_llama_pretrained(dir, DType::Float64);
  expect_same_llama_weights(model, *f64);
}

// float32 files widen into a float64 model; float64 files never narrow.
TEST(LlamaPretrained, Float64FilesDoNotNarrowIntoFloat32) {
  Llama model(tiny_llama(false, 1, DType::Float64));
  const std::string dir = fresh_folder("f64");
  save_llama_pretrained(model, dir);
  EXPECT_EQ(json_of(fs::path(dir) / "config.json")["torch_dtype"], "float64");
  expect_same_llama_weights(model, *load_llama_pretrained(dir, DType::Float64));
  const std::string message = testing::error_of([&] { load_llama_pretrained(dir, DType::Float32); });
  EXPECT_TRUE(testing::contains(message, "Llama folder '" + dir + "'")) << message;
  EXPECT_TRUE(testing::contains(message, dir + "/model.safetensors")) << message;
  EXPECT_TRUE(testing::contains(message, "'model.embed_tokens.weight' has dtype F64 in file, F32 in model")) << message;
  Llama f32(tiny_llama(false, 1));
  save_llama_pretrained(f32, dir);
  EXPECT_EQ(load_llama_pretrained(dir, DType::Float64)->named_parameters()[0].second.to_vector<double>(),
            f32.named_parameters()[0].second.to_vector<double>());
}

// What other writers hold: a LlamaModel's names (no "model."), rotary
// inv_freq buffers of older transformers, a tied head's copy.
TEST(LlamaPretrained, LlamaModelNamesBuffersAndATiedHeadsCopyLoad) {
  Llama model(tiny_llama(true, 1));
  const std::string dir = fresh_folder("bare");
  save_llama_pretrained(model, dir);
  Named bare;
  for (const auto& [name, tensor] : model.named_parameters()) bare.emplace_back(name.substr(6), tensor);
  bare.emplace_back("layers.0.self_attn.rotary_emb.inv_freq", zeros({2}));
  bare.emplace_back("lm_head.weight", model.named_parameters()[0].second);
  write_safetensors(dir + "/model.safetensors", bare);
  Llama loaded(tiny_llama(true, 2));
  load_llama_weights(loaded, dir);
  expect_same_llama_weights(model, loaded);
}

// A copy of `tensors` with `name` replaced by `value` (removed when undefined)
// or, where absent, added.
Named edited(Named tensors, const std::string& name, const Tensor& value) {
  for (auto it = tensors.begin(); it != tensors.end(); ++it) {
    if (it->first != name) continue;
    if (value.defined()) {
      it->second = value;
    } else {
      tensors.erase(it);
    }
    return tensors;
  }
  tensors.emplace_back(name, value);
  return tensors;
}

TEST(LlamaPretrained, DefectsOfTheWeightsAreErrorsNamingFolderFileAndKey) {
  Llama model(tiny_llama(false, 1));
  const std::string dir = fresh_folder("defects");
  save_llama_pretrained(model, dir);
  const std::string file = dir + "/model.safetensors";
  const Named good = model.named_parameters();
  const std::string before = logits_of(model);
  const auto refused = [&](const Named& tensors, const std::vector<std::string>& parts) {
    write_safetensors(file, tensors);
    Llama target(tiny_llama(false, 1));
    const std::string message = testing::error_of([&] { load_llama_weights(target, dir); });
    EXPECT_TRUE(testing::contains(message, "Llama folder '" + dir + "'")) << message;
    EXPECT_TRUE(testing::contains(message, file)) << message;
    for (const std::string& part : parts) EXPECT_TRUE(testing::contains(message, part)) << message;
    EXPECT_EQ(logits_of(target), before);  // all or nothing: nothing changed
  };
  refused(edited(good, "model.layers.1.mlp.up_proj.weight", Tensor()),
          {"missing", "'model.layers.1.mlp.up_proj.weight'"});
  refused(edited(good, "model.layers.2.mlp.up_proj.weight", zeros({24, 16})),
          {"name no parameter", "'model.layers.2.mlp.up_proj.weight'"});
  refused(edited(good, "model.layers.0.self_attn.k_proj.weight", zeros({16, 16})),
          {"'model.layers.0.self_attn.k_proj.weight' has shape (16, 16) in file, (8, 16) in model"});
  refused(edited(good, "model.norm.weight", zeros({16}, DType::Int64)),
          {"'model.norm.weight' has dtype I64 in file, F32 in model"});
  fs::remove(file);
  const std::string none = testing::error_of([&] { load_llama_weights(model, dir); });
  EXPECT_TRUE(testing::contains(none, "neither model.safetensors nor model.safetensors.index.json")) << none;
}

TEST(LlamaPretrained, DefectsOfAShardedFolderAreErrorsNamingTheShard) {
  Llama model(tiny_llama(false, 1));
  const std::string dir = fresh_folder("shard_defects");
  save_llama_pretrained(model, dir, 4096);
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const nlohmann::json good = json_of(index_path);
  const auto refused = [&](const nlohmann::json& index, const std::vector<std::string>& parts) {
    std::ofstream(index_path) << index.dump();
    Llama target(tiny_llama(false, 2));
    const std::string message = testing::error_of([&] { load_llama_weights(target, dir); });
    EXPECT_TRUE(testing::contains(message, "Llama folder '" + dir + "'")) << message;
    for (const std::string& part : parts) EXPECT_TRUE(testing::contains(message, part)) << message;
  };
  nlohmann::json missing_shard = good;
  missing_shard["weight_map"]["model.norm.weight"] = "model-00009-of-00009.safetensors";
  refused(missing_shard, {"maps 'model.norm.weight' to shard 'model-00009-of-00009.safetensors', which is missing"});
  nlohmann::json moved = good;  // the index names the wrong shard for a tensor
  const std::string first = good["weight_map"]["model.embed_tokens.weight"];
  const std::string last = good["weight_map"]["lm_head.weight"];
  ASSERT_NE(first, last);
  moved["weight_map"]["lm_head.weight"] = first;
  refused(moved, {"maps 'lm_head.weight' to shard '" + dir + "/" + first + "', which does not hold it"});
  nlohmann::json unlisted = good;  // a shard's tensor the index leaves out, and so the model misses
  unlisted["weight_map"].erase("model.norm.weight");
  refused(unlisted, {"'model.norm.weight'"});
  refused(nlohmann::json{{"metadata", {}}}, {"has no weight_map"});
  // The folder as saved loads.
  std::ofstream(index_path) << good.dump();
  EXPECT_EQ(logits_of(model), logits_of(*load_llama_pretrained(dir)));
}

TEST(LlamaPretrained, ConfigsRematDoesNotComputeAreErrorsNamingTheKey) {
  Llama model(tiny_llama(false, 1));
  const std::string dir = fresh_folder("config");
  save_llama_pretrained(model, dir);
  const fs::path path = fs::path(dir) / "config.json";
  const nlohmann::json good = json_of(path);
  const auto refused = [&](const char* key, const nlohmann::json& value, const std::string& part) {
    nlohmann::json config = good;
    config[key] = value;
    std::ofstream(path) << config.dump();
    const std::string message = testing::error_of([&] { load_llama_config(dir); });
    EXPECT_TRUE(testing::contains(message, "Llama config '" + path.string() + "'")) << message;
    EXPECT_TRUE(testing::contains(message, part)) << key << ": " << message;
  };
  refused("attention_bias", true, "attention_bias is true");
  refused("mlp_bias", true, "mlp_bias is true");
  refused("hidden_act", "gelu", "hidden_act is 'gelu'");
  refused("rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}},
          R"(rope_scaling is {"factor":8.0,"rope_type":"llama3"})");
  refused("pretraining_tp", 2, "pretraining_tp is 2");
  refused("attention_dropout", 0.1, "attention_dropout is 0.1");
  refused("model_type", "mistral", "model_type is 'mistral'");
  refused("architectures", {"LlamaForSequenceClassification"},
          R"(architectures is ["LlamaForSequenceClassification"])");
  refused("head_dim", 8, "head_dim is 8");
  refused("num_key_value_heads", 3, "num_key_value_heads 3 does not divide num_attention_heads 4");
  refused("hidden_size", 18, "hidden_size 18 is not a multiple of num_attention_heads 4");
  refused("rms_norm_eps", 0, "rms_norm_eps is 0");
  refused("rope_theta", -1, "rope_theta is -1");
  refused("vocab_size", "many", "vocab_size is \"many\"");
  // HF's defaults where keys are absent; null num_key_value_heads is H.
  nlohmann::json sparse{{"model_type", "llama"}, {"hidden_size", 16}, {"intermediate_size", 24},
                        {"num_hidden_layers", 1}, {"num_attention_heads", 4}, {"num_key_value_heads", nullptr},
                        {"vocab_size", 19}};
  std::ofstream(path) << sparse.dump();
  const LlamaConfig read = load_llama_config(dir);
  EXPECT_EQ(read.num_key_value_heads, 4);
  EXPECT_EQ(read.rope_theta, 10000.0);
  EXPECT_EQ(read.rms_norm_eps, 1e-6);
  EXPECT_EQ(read.max_position_embeddings, 2048);
  EXPECT_FALSE(read.tie_word_embeddings);
  fs::remove(path);
  EXPECT_TRUE(testing::contains(testing::error_of([&] { load_llama_config(dir); }), "cannot be read"));
}

// Every file's bytes are written before any name changes: a save that fails
// on any one file (a weight shard, the index, config.json) leaves the
// folder's files as they were, and the error names the file.
TEST(LlamaPretrained, ASaveThatFailsLeavesTheFolderAsItWas) {
  Llama model(tiny_llama(false, 1)), other(tiny_llama(false, 2));
  const std::string dir = fresh_folder("failed_save");
  save_llama_pretrained(model, dir, 4096);
  const std::set<std::string> files = files_in(dir);
  std::map<std::string, std::string> bytes;
  for (const std::string& name : files) bytes[name] = read_file(fs::path(dir) / name);
  for (const std::string name : {"model-00002-of-", "model.safetensors.index.json", "config.json"}) {
    SCOPED_TRACE(name);
    ::setenv("REMAT_FAULT_WRITE", fmt::format("ENOSPC:{}:16", name).c_str(), 1);
    const std::string message = testing::error_of([&] { save_llama_pretrained(other, dir, 4096); });
    ::unsetenv("REMAT_FAULT_WRITE");
    EXPECT_TRUE(testing::contains(message, "cannot write '" + (fs::path(dir) / name).string())) << message;
    EXPECT_TRUE(testing::contains(message, "(ENOSPC)")) << message;
    EXPECT_EQ(files_in(dir), files);  // no temporary left
    for (const std::string& file : files) EXPECT_TRUE(read_file(fs::path(dir) / file) == bytes[file]) << file;
  }
  EXPECT_EQ(logits_of(model), logits_of(*load_llama_pretrained(dir)));
}

}  // namespace
}  // namespace remat::nn
