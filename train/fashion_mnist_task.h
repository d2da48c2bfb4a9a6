// The Fashion-MNIST task: an MLP 784-256-256-10 trained with AdamW on the
// images of Debian's dataset-fashion-mnist, evaluated on the test split after
// every epoch. Called by `remat train --task fashion-mnist`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/fashion_mnist.h"

namespace remat::train {

struct FashionMnistOptions {
  int epochs = 3;
  int64_t batch_size = 64;
  double lr = 1e-3;
  double weight_decay = 1e-2;
  std::vector<int64_t> hidden = {256, 256};
  uint64_t seed = 0;
  int threads = 2;
  std::string data_dir = std::string(data::kFashionMnistDir);
  // Stop after this many batches per epoch (0: all), for quick runs and tests.
  int64_t max_batches = 0;
};

struct EpochResult {
  int epoch = 0;                // 1-based
  double train_loss = 0;        // mean over the epoch's batches
  double test_loss = 0;         // mean over the test split
  double test_accuracy = 0;     // fraction in [0, 1]
  double seconds = 0;           // training and evaluation of this epoch
  int64_t peak_activation_bytes = 0;  // peak rise of activation + temporary bytes over a training step
};

// Trains and returns one result per epoch; on_epoch is called as each ends,
// on_progress(batch, batches, running loss) every few seconds.
std::vector<EpochResult> train_fashion_mnist(
    const FashionMnistOptions& options, const std::function<void(const EpochResult&)>& on_epoch = {},
    const std::function<void(int64_t, int64_t, double)>& on_progress = {});

}  // namespace remat::train
