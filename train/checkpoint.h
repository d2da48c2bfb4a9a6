// Training checkpoints: one safetensors file holding the model's parameters
// ("model.<name>"), the optimizer's state ("optimizer.<name>"), the step
// reached (metadata "step") and, when training with LocalSGD, its step count
// (metadata "local_sgd_steps") and DiLoCo's outer state ("local_sgd.<name>"),
// so that a killed run resumes where its last checkpoint was written and
// loses only the work since. The file is written
// to a temporary name and renamed, so a crash never leaves half a checkpoint.
// Called by the training tasks.
#pragma once

#include <cstdint>
#include <string>

#include "nn/module.h"
#include "nn/safetensors.h"
#include "optim/optimizer.h"
#include "train/local_sgd.h"

namespace remat::train {

void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer& optimizer, int64_t step,
                     nn::SafetensorsMetadata metadata = {}, const LocalSGD* local_sgd = nullptr);

// Restores model, optimizer (and LocalSGD) from `path` and returns the step it holds.
// All or nothing: a file that does not fit the model (a missing or extra
// parameter, another shape) or the optimizer is an error naming what, and
// nothing is changed. With local_sgd, its count and state come back too (a
// file without them is an error).
int64_t load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& optimizer,
                        LocalSGD* local_sgd = nullptr);

}  // namespace remat::train
