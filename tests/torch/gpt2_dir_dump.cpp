// The C++ half of the Hugging Face round trip (tests/torch/hf_gpt2.py): loads
// a GPT-2 folder that transformers wrote, runs forward and backward on the
// batch the script wrote with Hugging Face's loss convention, and writes the
// loss, every gradient and the model saved back as a GPT-2 folder.
//
//   gpt2_dir_dump --in HF_DIR --batch batch.safetensors --out DIR
//
// Hugging Face shifts the labels inside the model: the loss of input ids
// (B, T) compares logits 0..T-2 with ids 1..T-1. remat's GPT takes targets
// aligned with the logits, so it is given ids[:, :-1] and targets
// ids[:, 1:]: causal attention makes those logits the same.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/factory.h"
#include "nn/gpt2_pretrained.h"
#include "ops/ops.h"

int main(int argc, char** argv) {
  using namespace remat;
  std::string in, batch_path, out;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--in") in = value;
    else if (flag == "--batch") batch_path = value;
    else if (flag == "--out") out = value;
  }
  if (in.empty() || batch_path.empty() || out.empty()) {
    fmt::print(stderr, "usage: gpt2_dir_dump --in HF_DIR --batch batch.safetensors --out DIR\n");
    return 2;
  }
  try {
    nn::GPT model(nn::load_gpt2_config(in));
    nn::load_gpt2_weights(model, in);
    Tensor ids;
    for (const auto& [name, tensor] : nn::read_safetensors(batch_path)) {
      if (name == "ids") ids = tensor;
    }
    const int64_t T = ids.size(1);
    const Tensor inputs = contiguous_copy(slice(ids, 1, 0, T - 1));
    const Tensor targets = contiguous_copy(slice(ids, 1, 1, T));
    const Tensor loss = model.forward(inputs, targets).loss;
    loss.backward();
    std::filesystem::create_directories(out);
    std::vector<std::pair<std::string, Tensor>> grads;
    for (const auto& [name, p] : model.named_parameters()) grads.emplace_back(name, p.grad());
    nn::write_safetensors(out + "/grads.safetensors", grads);
    std::ofstream(out + "/loss.json") << nlohmann::json{{"loss", loss.item<double>()}}.dump() << "\n";
    nn::save_gpt2_pretrained(model, out + "/saved");
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpt2_dir_dump: {}\n", e.what());
    return 1;
  }
  return 0;
}
