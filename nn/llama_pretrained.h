// Hugging Face Llama folders, as LlamaForCausalLM.save_pretrained writes
// them and from_pretrained reads them: config.json (LlamaConfig's keys) and
// the weights in model.safetensors, or split into
// model-00001-of-0000N.safetensors shards listed by
// model.safetensors.index.json ({"metadata": {"total_size": bytes},
// "weight_map": {name: shard file}}).
//
//   auto model = nn::load_llama_pretrained("TinyLlama-dir", DType::Float32);
//   ...
//   nn::save_llama_pretrained(*model, "out-dir");   // from_pretrained("out-dir") reads it
//
// Files of float32, float64 or bfloat16 tensors are read into a model of
// either float dtype (bfloat16 widens exactly; float64 into float32 is an
// error, not a rounding). A tied head's "lm_head.weight", which files may
// hold or leave out, is the token embedding and is not read; rotary
// inv_freq buffers that older files hold are left out too.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/dtype.h"
#include "nn/llama.h"

namespace remat::nn {

// FOLDER/config.json as a LlamaConfig (HF's defaults where a key is
// absent), with `dtype` for the parameters (the file's torch_dtype is only
// the weights' storage) and `seed` for the initialisation. Errors name the
// file, the key and its value: a missing file or required key, model_type
// other than "llama", values remat's Llama does not compute (attention_bias
// or mlp_bias true, hidden_act other than "silu", rope_scaling not null,
// pretraining_tp > 1, attention_dropout > 0, a head_dim other than
// hidden_size / num_attention_heads), and values out of range.
LlamaConfig load_llama_config(const std::string& folder, DType dtype = DType::Float32, uint64_t seed = 0);

// FOLDER's weights into `model` (all or nothing), from model.safetensors
// or, where that is absent, the shards of model.safetensors.index.json.
// Errors name the folder, the file and the key: a key of the model missing,
// a key no parameter has, a shape or dtype that differs (both named), an
// index naming a shard that is missing, a shard the index does not agree
// with.
void load_llama_weights(Llama& model, const std::string& folder);

// load_llama_config then load_llama_weights.
std::unique_ptr<Llama> load_llama_pretrained(const std::string& folder, DType dtype = DType::Float32,
                                             uint64_t seed = 0);

// FOLDER/config.json (HF's keys, so that transformers reads it) and the
// weights in the model's dtype: model.safetensors when they fit in
// max_shard_bytes, else shards of at most max_shard_bytes each (a tensor
// larger than that alone in its shard, as transformers does) and
// model.safetensors.index.json (its weight_map sorted by name, as
// transformers writes it). FOLDER is made if missing; weight files of an
// earlier save that this one does not write (a single file where shards now
// are, or the reverse) are removed. Every file is written whole or not at
// all (engine/file_write.h), and all of their bytes before any name
// changes: a save that fails writing leaves the folder as it was.
// config.json's name comes last. A tied head writes no lm_head.weight.
// 5 GB is transformers' default limit.
void save_llama_pretrained(const Llama& model, const std::string& folder, int64_t max_shard_bytes = 5'000'000'000);

}  // namespace remat::nn
