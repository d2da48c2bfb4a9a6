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

// Errors when a tensor holds a NaN or an infinity (a run that diverged must
// not overwrite its last good checkpoint); nothing is written then. `step` is
// the number of optimizer steps taken.
void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer& optimizer, int64_t step,
                     nn::SafetensorsMetadata metadata = {}, const LocalSGD* local_sgd = nullptr);

// Restores model, optimizer (and LocalSGD) from `path` and returns the step it holds.
// All or nothing: a file that does not fit the model (a missing or extra
// parameter, another shape) or the optimizer is an error naming what, and
// nothing is changed. With local_sgd, its count and state come back too (a
// file without them is an error). A file no run could have written is an
// error too: a NaN or infinity in any tensor, a negative exp_avg_sq, an
// optimizer step count above the file's step, or counts that all fall short
// of it.
int64_t load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& optimizer,
                        LocalSGD* local_sgd = nullptr);

// Errors, naming every difference, unless the metadata of the checkpoint at
// `path` holds each of `run`'s entries with the same value: what the run that
// resumes from it is (task, model configuration, vocabulary, a fingerprint of
// the data, world size), so that a resume on another text or head split does
// not train on a mis-mapped model. A key the file lacks is a difference.
void check_checkpoint_matches(const std::string& path, const nn::SafetensorsMetadata& run);

}  // namespace remat::train
