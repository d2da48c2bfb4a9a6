// libFuzzer target: data/fashion_mnist.h's IDX readers (read_idx_images for
// 28 x 28 images, read_idx_labels for 10 classes) on arbitrary bytes, gzipped
// or plain. Accepted images are (N, 784) float32 in [0, 1]; accepted labels
// are (N) int64 in 0..9. Seeds: fuzz/corpus/idx_fuzz/.
#include "fuzz/fuzz_input.h"
#include "data/fashion_mnist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static remat::fuzz::InputFile file("idx");
  const std::string& path = file.write(data, size);
  remat::fuzz::expect_result_or_error("idx images", [&] {
    const remat::Tensor images = remat::data::read_idx_images(path);
    FUZZ_CHECK(images.dim() == 2 && images.size(1) == 784 && images.dtype() == remat::DType::Float32,
               "images are {}", images.str());
    const float* p = images.data<float>();
    for (int64_t i = 0; i < images.numel(); ++i) FUZZ_CHECK(p[i] >= 0 && p[i] <= 1, "pixel {} is {}", i, p[i]);
  });
  remat::fuzz::expect_result_or_error("idx labels", [&] {
    const remat::Tensor labels = remat::data::read_idx_labels(path);
    FUZZ_CHECK(labels.dim() == 1 && labels.dtype() == remat::DType::Int64, "labels are {}", labels.str());
    const int64_t* p = labels.data<int64_t>();
    for (int64_t i = 0; i < labels.numel(); ++i) FUZZ_CHECK(p[i] >= 0 && p[i] < 10, "label {} is {}", i, p[i]);
  });
  return 0;
}
