// libFuzzer target: nn/safetensors.cpp's reader (read_safetensors and
// read_safetensors_metadata) on arbitrary bytes. A file it accepts must be
// what the format says: 8 + header length + the tensors' bytes is the whole
// file, every tensor dense on the CPU in a supported dtype, under a real name.
// Seeds: fuzz/corpus/safetensors_fuzz/ (written by fuzz/seeds.cpp).
#include <cstring>

#include "fuzz/fuzz_input.h"
#include "nn/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static remat::fuzz::InputFile file("safetensors");
  const std::string& path = file.write(data, size);
  remat::fuzz::expect_result_or_error("safetensors", [&] {
    const auto tensors = remat::nn::read_safetensors(path);
    uint64_t header = 0;
    FUZZ_CHECK(size >= 8, "accepted a file of {} bytes", size);
    std::memcpy(&header, data, 8);
    uint64_t body = 0;
    for (const auto& [name, t] : tensors) {
      FUZZ_CHECK(!name.empty() && name != "__metadata__", "accepted a tensor named '{}'", name);
      FUZZ_CHECK(t.defined() && t.is_contiguous() && t.device().is_cpu(), "tensor '{}' is {}", name, t.str());
      const remat::DType dtype = t.dtype();
      FUZZ_CHECK(dtype == remat::DType::Float32 || dtype == remat::DType::Float64 || dtype == remat::DType::Int64,
                 "tensor '{}' has dtype {}", name, remat::dtype_name(dtype));
      body += t.nbytes();
    }
    FUZZ_CHECK(header <= size - 8 && 8 + header + body == size,
               "header of {} bytes and tensors of {} bytes in a file of {}", header, body, size);
    remat::nn::read_safetensors_metadata(path);
  });
  return 0;
}
