// Fashion-MNIST from the Debian package `dataset-fashion-mnist`: reads the
// gzipped IDX files into tensors, images as float32 (N, 784) in [0, 1] and
// labels as int64 (N) in 0..9. Reads files only (never downloads); every
// malformed input is a remat::Error naming the file and the values.
// Called by the fashion-mnist training task and by tests/train.
//
//   data::Dataset train = data::load_fashion_mnist("train");  // 60000 rows
//   data::DataLoader loader(train, {.batch_size = 128, .shuffle = true});
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/tensor.h"
#include "data/data_loader.h"

namespace remat::data {

inline constexpr std::string_view kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr int64_t kFashionMnistSide = 28;     // images are 28 x 28
inline constexpr int64_t kFashionMnistClasses = 10;  // labels 0..9

// split "train" (60000 images) or "test" (10000): reads
// <dir>/{train,t10k}-images-idx3-ubyte.gz and the matching labels file, and
// checks that both hold the same number of items. A missing file is an error
// naming its full path and the package to install.
Dataset load_fashion_mnist(std::string_view split, const std::string& dir = std::string(kFashionMnistDir));

// The two IDX readers under load_fashion_mnist, for gzipped (or plain) IDX
// files of unsigned bytes; the header's integers are big-endian int32.
// Images: magic 0x00000803, N, rows, cols, then N*rows*cols bytes, with
// rows x cols = expected_rows x expected_cols. Returns float32 (N, rows*cols),
// each byte divided by 255.
Tensor read_idx_images(const std::string& path, int64_t expected_rows = kFashionMnistSide,
                       int64_t expected_cols = kFashionMnistSide);
// Labels: magic 0x00000801, N, then N bytes, each below num_classes.
// Returns int64 (N).
Tensor read_idx_labels(const std::string& path, int64_t num_classes = kFashionMnistClasses);

}  // namespace remat::data
