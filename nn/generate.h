// Sampling text from a causal language model: ids appended one at a time,
// each drawn from softmax(logits / temperature) at the last position. Used
// by GPT::generate and, for a Llama, by tasks/kjv_gpt_task.cpp. Not beam
// search, not top-k.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/rng.h"
#include "nn/module.h"

namespace remat::nn {

// Appends max_new_tokens ids to `ids`, each from one uniform draw of
// `generator` over softmax(logits / temperature) of the last position of
// model.forward((1, T) ids), T the last min(ids, window) ids. Runs without
// grad in eval mode and restores the mode after, even when forward throws.
// An empty prompt or a temperature <= 0 is an error naming `who`.
std::vector<int64_t> generate_tokens(Module& model, std::vector<int64_t> ids, int64_t max_new_tokens, int64_t window,
                                     double temperature, Generator& generator, std::string_view who);

}  // namespace remat::nn
