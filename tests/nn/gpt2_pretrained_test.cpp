// Hugging Face GPT-2 directories (nn/gpt2_pretrained.h): a round trip keeps
// every weight and the loss, a GPT2Model's names (no "transformer.") and a
// file's tied head and attention buffers load, and configurations remat's
// GPT does not compute are errors naming the field.
#include "nn/gpt2_pretrained.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "engine/factory.h"
#include "tests/support/errors.h"

namespace remat::nn {
namespace {

namespace fs = std::filesystem;

GPTConfig tiny_gpt2(bool tied, uint64_t seed) {
  return {.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 8, .dropout = 0.0,
          .tie_weights = tied, .seed = seed};
}

std::string fresh(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("remat_gpt2_dir_" + name);
  fs::remove_all(dir);
  return dir.string();
}

double loss_of(GPT& model) {
  Generator g(9);
  const Tensor ids = randint(11, {2, 8}, g), targets = randint(11, {2, 8}, g);
  return model.forward(ids, targets).loss.item<double>();
}

void expect_same_gpt2_weights(const GPT& a, const GPT& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].first, pb[i].first);
    EXPECT_EQ(pa[i].second.to_vector<float>(), pb[i].second.to_vector<float>()) << pa[i].first;
  }
}

nlohmann::json config_json(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "config.json");
  return nlohmann::json::parse(in);
}

TEST(Gpt2Pretrained, ARoundTripKeepsEveryWeightAndTheLoss) {
  for (const bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    GPT model(tiny_gpt2(tied, 1));
    const std::string dir = fresh(tied ? "tied" : "untied");
    save_gpt2_pretrained(model, dir, {{"task", "test"}});
    const nlohmann::json config = config_json(dir);
    EXPECT_EQ(config["model_type"], "gpt2");
    EXPECT_EQ(config["architectures"][0], "GPT2LMHeadModel");
    EXPECT_EQ(config["n_positions"], 8);
    EXPECT_EQ(config["tie_word_embeddings"], tied);
    bool has_head = false;
    for (const auto& [name, tensor] : read_safetensors(dir + "/model.safetensors")) has_head |= name == "lm_head.weight";
    EXPECT_EQ(has_head, !tied);  // save_pretrained writes no tied head
    EXPECT_EQ(read_safetensors_metadata(dir + "/model.safetensors").at("format"), "pt");

    const GPTConfig read = load_gpt2_config(dir, /*seed=*/7);
    EXPECT_EQ(read.vocab_size, 11);
    EXPECT_EQ(read.block_size, 8);
    EXPECT_EQ(read.n_layer, 2);
    EXPECT_EQ(read.n_head, 2);
    EXPECT_EQ(read.n_embd, 8);
    EXPECT_EQ(read.tie_weights, tied);
    EXPECT_EQ(read.dropout, 0.0);
    EXPECT_EQ(read.seed, 7u);
    GPT loaded(read);
    load_gpt2_weights(loaded, dir);
    expect_same_gpt2_weights(model, loaded);
    EXPECT_EQ(loss_of(model), loss_of(loaded));
  }
}

// What a GPT2Model's save_pretrained holds: names without "transformer.",
// and (older transformers) the attention masks as buffers; a tied head's
// copy of the embedding may be there too.
TEST(Gpt2Pretrained, NamesWithoutThePrefixAndBuffersLoad) {
  GPT model(tiny_gpt2(true, 1));
  const std::string dir = fresh("bare");
  save_gpt2_pretrained(model, dir);
  std::vector<std::pair<std::string, Tensor>> bare;
  for (const auto& [name, tensor] : model.named_parameters()) bare.emplace_back(name.substr(12), tensor);
  bare.emplace_back("h.0.attn.bias", zeros({1, 1, 8, 8}));
  bare.emplace_back("h.0.attn.masked_bias", zeros({1}));
  bare.emplace_back("lm_head.weight", model.named_parameters()[0].second);
  write_safetensors(dir + "/model.safetensors", bare);
  GPT loaded(tiny_gpt2(true, 2));
  load_gpt2_weights(loaded, dir);
  expect_same_gpt2_weights(model, loaded);
  // Both spellings of one weight in a file are an error, not a silent pick.
  bare.emplace_back("transformer.wte.weight", model.named_parameters()[0].second);
  write_safetensors(dir + "/model.safetensors", bare);
  const std::string message = testing::error_of([&] { load_gpt2_weights(loaded, dir); });
  EXPECT_TRUE(testing::contains(message, "both go to parameter 'transformer.wte.weight'")) << message;
}

TEST(Gpt2Pretrained, VariantsRematDoesNotComputeAreErrorsNamingTheField) {
  GPT model(tiny_gpt2(true, 1));
  const std::string dir = fresh("variants");
  save_gpt2_pretrained(model, dir);
  const nlohmann::json good = config_json(dir);
  const auto refused = [&](const char* key, const nlohmann::json& value, const std::string& part) {
    nlohmann::json edited = good;
    if (value.is_discarded()) edited.erase(key);
    else edited[key] = value;
    std::ofstream(fs::path(dir) / "config.json") << edited.dump();
    const std::string message = testing::error_of([&] { load_gpt2_config(dir); });
    EXPECT_TRUE(testing::contains(message, part)) << key << ": " << message;
  };
  refused("activation_function", "relu", "activation_function is 'relu'");
  refused("n_inner", 16, "n_inner is 16");
  refused("attn_pdrop", 0.2, "differ; remat's GPT has one dropout probability");
  refused("reorder_and_upcast_attn", true, "reorder_and_upcast_attn is true");
  refused("model_type", "llama", "model_type is 'llama'");
  refused("n_layer", nlohmann::json(nlohmann::json::value_t::discarded), "n_layer is missing");
  refused("n_head", "two", "n_head is missing or not an integer");
  // Values LayerNorm or the initialisers would refuse without the file's
  // name ("LayerNorm: need ... eps > 0"): named here, with the file.
  const std::string file = "GPT-2 config '" + (fs::path(dir) / "config.json").string() + "': ";
  refused("layer_norm_epsilon", -1e-5, file + "layer_norm_epsilon is -1e-05; LayerNorm needs a finite eps > 0");
  refused("layer_norm_epsilon", 0, file + "layer_norm_epsilon is 0");
  refused("initializer_range", -0.02, file + "initializer_range is -0.02");
  fs::remove(fs::path(dir) / "config.json");
  EXPECT_TRUE(testing::contains(testing::error_of([&] { load_gpt2_config(dir); }), "cannot be read"));
}

// Both files are written whole or not at all, and together: a save that
// fails on either leaves the folder's files as they were (config.json's
// bytes are written before the weights change, so new weights never stand
// beside an old config.json), and the error names the file.
TEST(Gpt2Pretrained, ASaveThatFailsLeavesTheFolderAsItWas) {
  GPT model(tiny_gpt2(true, 1)), other(tiny_gpt2(true, 2));
  const std::string dir = fresh("failed_save");
  save_gpt2_pretrained(model, dir);
  const auto bytes_of = [&](const char* name) {
    std::ifstream in(fs::path(dir) / name, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string weights = bytes_of("model.safetensors"), config = bytes_of("config.json");
  for (const char* name : {"model.safetensors", "config.json"}) {
    SCOPED_TRACE(name);
    ::setenv("REMAT_FAULT_WRITE", fmt::format("ENOSPC:{}:16", name).c_str(), 1);
    const std::string message = testing::error_of([&] { save_gpt2_pretrained(other, dir); });
    ::unsetenv("REMAT_FAULT_WRITE");
    EXPECT_TRUE(testing::contains(message, "cannot write '" + (fs::path(dir) / name).string() + "'")) << message;
    EXPECT_TRUE(testing::contains(message, "(ENOSPC)")) << message;
    EXPECT_TRUE(bytes_of("model.safetensors") == weights);
    EXPECT_TRUE(bytes_of("config.json") == config);
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);  // no temporary left
}

// gpt2_pretrained_bytes bounds what a save writes from above, by a few KiB.
TEST(Gpt2Pretrained, TheBytesOfASaveAreKnownBeforeIt) {
  for (const bool tied : {true, false}) {
    GPT model(tiny_gpt2(tied, 1));
    const std::string dir = fresh("bytes");
    const SafetensorsMetadata metadata{{"symbols", std::string("\n\x01 abc\"\\\0", 9)}, {"steps", "1000"}};
    save_gpt2_pretrained(model, dir, metadata);
    const int64_t written = static_cast<int64_t>(fs::file_size(fs::path(dir) / "model.safetensors") +
                                                 fs::file_size(fs::path(dir) / "config.json"));
    const int64_t bound = gpt2_pretrained_bytes(model, metadata);
    EXPECT_GE(bound, written);
    EXPECT_LT(bound, written + 8192);
  }
}

}  // namespace
}  // namespace remat::nn
