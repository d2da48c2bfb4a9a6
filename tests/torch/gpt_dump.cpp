// The C++ half of the GPT gradient-parity test with PyTorch: builds a small
// GPT with random weights, runs forward and backward on a random batch, and
// writes what tests/torch/gpt_parity.py needs to do the same in PyTorch and
// compare: config.json, weights.safetensors, batch.safetensors,
// grads.safetensors, loss.json.
//
//   gpt_parity_dump --dtype float32|float64 --tied 1|0 --out DIR
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/autograd.h"
#include "engine/factory.h"
#include "nn/gpt.h"
#include "nn/safetensors.h"

int main(int argc, char** argv) {
  using namespace remat;
  std::string dtype_name = "float32", out;
  bool tied = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--dtype") dtype_name = value;
    else if (flag == "--tied") tied = value == "1";
    else if (flag == "--out") out = value;
  }
  if (out.empty() || (dtype_name != "float32" && dtype_name != "float64")) {
    fmt::print(stderr, "usage: gpt_parity_dump --dtype float32|float64 --tied 1|0 --out DIR\n");
    return 2;
  }
  const DType dtype = dtype_name == "float32" ? DType::Float32 : DType::Float64;
  const nn::GPTConfig config{.vocab_size = 11, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 16,
                             .dropout = 0.0, .tie_weights = tied, .dtype = dtype, .seed = 3};
  nn::GPT model(config);
  // Weights far from GPT-2's small init (and LayerNorm away from 1 and 0), so
  // that every term of every gradient is exercised.
  Generator generator(5);
  {
    NoGradGuard no_grad;
    for (const auto& [name, p] : model.named_parameters()) {
      const Tensor values = normal(p.shape(), 0.0, 0.3, dtype, generator);
      std::memcpy(p.raw_data(), values.raw_data(), values.nbytes());
    }
  }
  const Tensor ids = randint(config.vocab_size, {3, config.block_size}, generator);
  const Tensor targets = randint(config.vocab_size, {3, config.block_size}, generator);
  const Tensor loss = model.forward(ids, targets).loss;
  loss.backward();

  std::filesystem::create_directories(out);
  nn::save_safetensors(model, out + "/weights.safetensors");
  nn::write_safetensors(out + "/batch.safetensors", {{"ids", ids}, {"targets", targets}});
  std::vector<std::pair<std::string, Tensor>> grads;
  for (const auto& [name, p] : model.named_parameters()) grads.emplace_back(name, p.grad());
  nn::write_safetensors(out + "/grads.safetensors", grads);
  std::ofstream(out + "/loss.json") << nlohmann::json{{"loss", loss.item<double>()}}.dump() << "\n";
  std::ofstream(out + "/config.json") << nlohmann::json{{"vocab_size", config.vocab_size},
                                                        {"block_size", config.block_size},
                                                        {"n_layer", config.n_layer},
                                                        {"n_head", config.n_head},
                                                        {"n_embd", config.n_embd},
                                                        {"tie_weights", tied},
                                                        {"dtype", dtype_name}}.dump()
                                      << "\n";
  fmt::print("wrote {} ({}, tied {}): loss {}\n", out, dtype_name, tied, loss.item<double>());
  return 0;
}
