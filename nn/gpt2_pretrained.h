// Hugging Face GPT-2 directories, as `GPT2LMHeadModel.save_pretrained`
// writes them and `from_pretrained` reads them: config.json (GPT2Config's
// fields) and model.safetensors (GPT-2's names, which nn::GPT shares).
//
//   nn::GPT model(nn::load_gpt2_config("gpt2-dir"));
//   nn::load_gpt2_weights(model, "gpt2-dir");
//   ...
//   nn::save_gpt2_pretrained(model, "out-dir");   // from_pretrained("out-dir") reads it
//
// Names are read with or without the "transformer." prefix (a GPT2Model's
// file has "h.0.attn.c_attn.weight", a GPT2LMHeadModel's
// "transformer.h.0..."); a tied head's "lm_head.weight", which files may
// hold or leave out, is the token embedding and is not read; the attention
// masks older versions saved as "attn.bias" and "attn.masked_bias" are
// buffers, not weights, and are left out too.
#pragma once

#include <cstdint>
#include <string>

#include "nn/gpt.h"
#include "nn/safetensors.h"

namespace remat::nn {

// The model configuration of DIR/config.json (GPT2Config's defaults where a
// field is absent), with `seed` for the initialisation of anything the
// weights do not set and for dropout; its dtype is torch_dtype (float32 or
// float64). Errors name the file and the field:
// a missing file or field, another model_type, or a GPT-2 variant nn::GPT
// does not compute (activation_function other than gelu_new, n_inner other
// than 4 n_embd, attention scaled by layer or upcast and reordered,
// dropout probabilities that differ), or values out of range (sizes,
// layer_norm_epsilon <= 0, a negative initializer_range).
GPTConfig load_gpt2_config(const std::string& dir, uint64_t seed = 0);

// DIR/model.safetensors into `model` (all or nothing; nn/safetensors.h),
// whose configuration must be the file's.
void load_gpt2_weights(GPT& model, const std::string& dir);

// DIR/config.json and DIR/model.safetensors (with `metadata`, and
// "format": "pt" as transformers expects); DIR is made if missing. A tied
// head writes no lm_head.weight, as save_pretrained does not. Both files are
// written whole or not at all (engine/file_write.h), the weights first.
void save_gpt2_pretrained(const GPT& model, const std::string& dir, SafetensorsMetadata metadata = {});

// At least the bytes save_gpt2_pretrained(model, dir, metadata) writes: the
// weights' exactly, their header and config.json bounded from above (by a
// few KiB), for a check of the disk's room before a run that ends in a save.
int64_t gpt2_pretrained_bytes(const GPT& model, const SafetensorsMetadata& metadata = {});

}  // namespace remat::nn
