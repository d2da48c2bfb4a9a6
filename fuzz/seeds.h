// The model and optimizer that the checkpoint seeds were saved from and that
// checkpoint_fuzz loads into: an MLP 2-3-2 and AdamW, the same on every run.
// Used by fuzz/seeds.cpp (which writes fuzz/corpus/) and fuzz/checkpoint_fuzz.cpp.
#pragma once

#include "engine/rng.h"
#include "nn/mlp.h"
#include "optim/adamw.h"

namespace remat::fuzz {

struct SeedModel {
  Generator generator{7};
  nn::MLP model{{2, 3, 2}, generator};
  optim::AdamW optimizer{model.parameters()};
};

}  // namespace remat::fuzz
