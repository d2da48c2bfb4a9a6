// Writes the seed corpus of every fuzz target, one valid input (or a few) of
// each kind, made by the project's own writers where it has one:
//   build-sanitize/fuzz/fuzz_seeds fuzz/corpus
// The output is committed (fuzz/corpus/<target>/); rerun this only when a
// format changes. Inputs found by fuzzing are added there by hand, beside these.
#include <zlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/factory.h"
#include "engine/file_write.h"
#include "fuzz/seeds.h"
#include "nn/safetensors.h"
#include "ops/ops.h"
#include "train/checkpoint.h"

namespace fs = std::filesystem;
using namespace remat;

namespace {

void write_bytes(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  write_file_atomically(path.string(), bytes);
}

void write_gzip(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  gzFile file = gzopen(path.c_str(), "wb9");
  REMAT_CHECK(file != nullptr && gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())) ==
                                     static_cast<int>(bytes.size()) && gzclose(file) == Z_OK,
              "cannot write {}", path.string());
}

std::string be32(uint32_t n) {
  return {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8), static_cast<char>(n)};
}

}  // namespace

int main(int argc, char** argv) {
  REMAT_CHECK(argc == 2, "usage: fuzz_seeds OUT_DIR (e.g. fuzz/corpus)");
  const fs::path out = argv[1];
  for (const char* target : {"safetensors_fuzz", "checkpoint_fuzz"}) fs::create_directories(out / target);

  // safetensors: one tensor of each supported dtype, with metadata.
  nn::write_safetensors((out / "safetensors_fuzz" / "three_dtypes.safetensors").string(),
                        {{"w", from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3})},
                         {"b", from_vector(std::vector<double>{0.5, -1}, {2})},
                         {"ids", from_vector(std::vector<int64_t>{7}, {1})}},
                        {{"step", "3"}});
  nn::write_safetensors((out / "safetensors_fuzz" / "empty.safetensors").string(), {});

  // checkpoint: the seed model after one AdamW step, so the optimizer has state.
  fuzz::SeedModel seed;
  const Tensor x = from_vector(std::vector<float>{1, -1, 0.5f, 2}, {2, 2});
  sum(mul(seed.model.forward(x), seed.model.forward(x))).backward();
  seed.optimizer.step();
  train::save_checkpoint((out / "checkpoint_fuzz" / "mlp_adamw_step1.safetensors").string(), seed.model,
                         seed.optimizer, 1);

  // IDX: two 28 x 28 images and five labels, gzipped and plain.
  std::string images = be32(0x803) + be32(2) + be32(28) + be32(28);
  for (int i = 0; i < 2 * 28 * 28; ++i) images.push_back(static_cast<char>(i % 251));
  const std::string labels = be32(0x801) + be32(5) + std::string{0, 3, 9, 1, 7};
  write_gzip(out / "idx_fuzz" / "images.gz", images);
  write_gzip(out / "idx_fuzz" / "labels.gz", labels);
  write_bytes(out / "idx_fuzz" / "labels.idx", labels);

  // budget strings: every unit, a fraction, an exponent.
  const std::vector<std::string> budgets{"4096", "512KiB", "64MiB", "1.5GiB", "100B", "2e6"};
  for (size_t i = 0; i < budgets.size(); ++i) write_bytes(out / "budget_fuzz" / ("budget" + std::to_string(i)), budgets[i]);

  // text: a verse, and bytes outside ASCII.
  write_bytes(out / "text_fuzz" / "verse.txt", "In the beginning God created the heaven and the earth.\n");
  write_bytes(out / "text_fuzz" / "high_bytes.txt", std::string("caf\xc3\xa9\t\x00\xff\n", 9));
  return 0;
}
