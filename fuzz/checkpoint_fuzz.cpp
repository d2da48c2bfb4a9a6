// libFuzzer target: train/checkpoint.cpp's load_checkpoint on arbitrary bytes,
// into the model and optimizer of the seeds (fuzz/seeds.cpp: an MLP 2-3-2
// with AdamW after one step). A checkpoint it accepts holds a step >= 0 and
// leaves every parameter its shape; one it rejects is a remat::Error.
#include "fuzz/fuzz_input.h"
#include "fuzz/seeds.h"
#include "train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static remat::fuzz::InputFile file("checkpoint");
  static remat::fuzz::SeedModel seed;
  const std::string& path = file.write(data, size);
  remat::fuzz::expect_result_or_error("checkpoint", [&] {
    const int64_t step = remat::train::load_checkpoint(path, seed.model, seed.optimizer);
    FUZZ_CHECK(step >= 0, "accepted step {}", step);
    for (const auto& [name, p] : seed.model.named_parameters()) {
      FUZZ_CHECK(p.is_contiguous() && p.requires_grad(), "parameter '{}' is {} after loading", name, p.str());
    }
  });
  return 0;
}
