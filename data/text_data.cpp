// The KJV text comes from the `bible` program of Debian's bible-kjv. The
// verse references ("Ge1:1 ") are stripped here rather than by the `sed` of
// the documented pipeline: the output is the same byte for byte, and the exit
// status we read is bible's own, which a shell pipeline would hide behind
// sed's. Window offsets come from Philox (engine/rng.h) keyed by the seed, as
// the DataLoader's shuffles do, so a batch needs no generator state.
#include "data/text_data.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "engine/allocator.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "engine/hash.h"
#include "engine/rng.h"

namespace remat::data {
namespace {

constexpr const char* kBibleCommand = "bible -f gen1:1-rev22:21 </dev/null";

// Whether an executable `name` is on the PATH.
bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return true;
  }
  return false;
}

// Everything `command` prints on stdout; fails on a non-zero exit.
std::string run_command(const char* command) {
  FILE* pipe = ::popen(command, "r");
  REMAT_CHECK(pipe != nullptr, "cannot run `{}`: {}", command, std::strerror(errno));
  std::string out;
  char buffer[1 << 16];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, got);
  const int status = ::pclose(pipe);
  REMAT_CHECK(status != -1, "`{}`: cannot read its exit status: {}", command, std::strerror(errno));
  REMAT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "`{}` failed ({} {})", command,
              WIFEXITED(status) ? "exit status" : "killed by signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  return out;
}

// `sed 's/^[^ ]* //'`: drops each line's leading run of non-spaces and the
// space after it; a line with no space is kept whole.
std::string strip_references(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;  // past the newline, if any
    size_t skip = start;
    while (skip < end && text[skip] != ' ' && text[skip] != '\n') ++skip;
    skip = skip < end && text[skip] == ' ' ? skip + 1 : start;
    out.append(text, skip, end - skip);
    start = end;
  }
  return out;
}

std::string describe_byte(unsigned char byte) {
  if (byte >= 0x20 && byte < 0x7f) return fmt::format("'{}' (0x{:02x})", static_cast<char>(byte), byte);
  return fmt::format("0x{:02x}", byte);
}

}  // namespace

std::string load_kjv() {
  REMAT_CHECK(on_path("bible"),
              "the `bible` program is not on the PATH; install the King James Bible with "
              "`apt-get install bible-kjv`");
  std::string text = strip_references(run_command(kBibleCommand));
  REMAT_CHECK(!text.empty(), "`{}` printed nothing; is the package bible-kjv installed completely?", kBibleCommand);
  return text;
}

std::string load_text_file(const std::string& path) {
  REMAT_CHECK(std::filesystem::is_regular_file(path), "text file {} not found (or not a regular file)", path);
  std::ifstream file(path, std::ios::binary);
  REMAT_CHECK(file.good(), "cannot open {}: {}", path, std::strerror(errno));
  std::ostringstream contents;
  contents << file.rdbuf();
  REMAT_CHECK(!file.bad(), "error while reading {}", path);
  std::string text = std::move(contents).str();
  // Said here, where the file is known: the tokenizer's own error cannot name it.
  REMAT_CHECK(!text.empty(), "text file '{}' is empty; a character model learns its vocabulary from the text, so "
              "it needs some", path);
  return text;
}

uint64_t fingerprint(std::string_view bytes) { return fnv1a(bytes); }

CharTokenizer::CharTokenizer(std::string_view text) {
  REMAT_CHECK(!text.empty(), "CharTokenizer: the text is empty, so there is no vocabulary");
  bool present[256] = {};
  for (const char c : text) present[static_cast<unsigned char>(c)] = true;
  for (int byte = 0; byte < 256; ++byte) {
    ids_[byte] = -1;
    if (present[byte]) {
      ids_[byte] = static_cast<int>(symbols_.size());
      symbols_.push_back(static_cast<char>(byte));
    }
  }
}

std::vector<int64_t> CharTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char byte = static_cast<unsigned char>(text[i]);
    REMAT_CHECK(ids_[byte] >= 0, "CharTokenizer::encode: byte {} at position {} is not in the vocabulary of {} symbols",
                describe_byte(byte), i, vocab_size());
    ids[i] = ids_[byte];
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    REMAT_CHECK(ids[i] >= 0 && ids[i] < vocab_size(), "CharTokenizer::decode: id {} at position {} is outside 0..{}",
                ids[i], i, vocab_size() - 1);
    text[i] = symbols_[static_cast<size_t>(ids[i])];
  }
  return text;
}

TextSplit split_text(const std::vector<int64_t>& ids, double validation_fraction) {
  REMAT_CHECK(validation_fraction >= 0.0 && validation_fraction < 1.0,
              "split_text: validation_fraction {} is outside [0, 1)", validation_fraction);
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t n_validation = static_cast<int64_t>(static_cast<double>(n) * validation_fraction);
  const int64_t n_train = n - n_validation;
  CategoryGuard data_bytes(MemoryCategory::Data);
  return TextSplit{
      from_vector(std::vector<int64_t>(ids.begin(), ids.begin() + n_train), {n_train}),
      from_vector(std::vector<int64_t>(ids.begin() + n_train, ids.end()), {n_validation}),
  };
}

Dataset text_blocks(const Tensor& ids, int64_t block_size) {
  REMAT_CHECK(ids.defined(), "text_blocks: the token tensor is undefined");
  REMAT_CHECK(ids.dim() == 1 && ids.dtype() == DType::Int64 && ids.device().is_cpu(),
              "text_blocks: tokens {} must be one int64 axis (N) on the CPU", ids.str());
  REMAT_CHECK(block_size > 0, "text_blocks: block_size is {}, it must be positive", block_size);
  REMAT_CHECK(ids.size(0) >= block_size + 1,
              "text_blocks: a text of {} tokens is too short for one block of block_size {} (needs at least {})",
              ids.size(0), block_size, block_size + 1);
  const Tensor source = ids.is_contiguous() ? ids : contiguous_copy(ids);
  const int64_t T = block_size, rows = (source.size(0) - 1) / T;
  CategoryGuard data_bytes(MemoryCategory::Data);
  Tensor inputs({rows, T}, DType::Int64);   // (R, T)
  Tensor targets({rows, T}, DType::Int64);  // (R, T)
  const int64_t* src = source.data<int64_t>();
  std::memcpy(inputs.data<int64_t>(), src, static_cast<size_t>(rows * T) * sizeof(int64_t));
  std::memcpy(targets.data<int64_t>(), src + 1, static_cast<size_t>(rows * T) * sizeof(int64_t));
  return {std::move(inputs), std::move(targets)};
}

}  // namespace remat::data
