// The KJV text comes from the `bible` program of Debian's bible-kjv. The
// verse references ("Ge1:1 ") are stripped here rather than by the `sed` of
// the documented pipeline: the output is the same byte for byte, and the exit
// status we read is bible's own, which a shell pipeline would hide behind
// sed's. Window offsets come from Philox (engine/rng.h) keyed by the seed, as
// the DataLoader's shuffles do, so a batch needs no generator state.
#include "train/text_data.h"

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

// A uniform integer in [0, bound) from 64 random bits (multiply-shift, as in
// the DataLoader's shuffle).
uint64_t below(uint64_t bound, uint64_t bits) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * bound) >> 64);
}

// Window b of step s draws from counter (s << 32) | b: disjoint for every
// (step, window) with fewer than 2^32 windows per batch.
constexpr int kWindowBits = 32;

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
  return std::move(contents).str();
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

TextWindows::TextWindows(Tensor ids, int64_t block_size, int64_t batch_size, uint64_t seed)
    : ids_(std::move(ids)), block_size_(block_size), batch_size_(batch_size), seed_(seed) {
  REMAT_CHECK(ids_.defined(), "TextWindows: the token tensor is undefined");
  REMAT_CHECK(ids_.dim() == 1 && ids_.dtype() == DType::Int64 && ids_.device().is_cpu(),
              "TextWindows: tokens {} must be one int64 axis (N) on the CPU", ids_.str());
  REMAT_CHECK(block_size_ > 0, "TextWindows: block_size is {}, it must be positive", block_size_);
  REMAT_CHECK(batch_size_ > 0 && batch_size_ < (int64_t{1} << kWindowBits),
              "TextWindows: batch_size is {}, it must be in 1..2^{}", batch_size_, kWindowBits);
  REMAT_CHECK(ids_.size(0) >= block_size_ + 1,
              "TextWindows: a text of {} tokens is too short for windows of block_size {} (needs at least {})",
              ids_.size(0), block_size_, block_size_ + 1);
  if (!ids_.is_contiguous()) ids_ = contiguous_copy(ids_);
}

std::vector<int64_t> TextWindows::offsets(int64_t step) const {
  REMAT_CHECK(step >= 0 && step < (int64_t{1} << kWindowBits), "TextWindows: step {} is outside 0..2^{}-1", step,
              kWindowBits);
  // Offsets 0..N-T-1: the target of the window's last position is ids[o + T].
  const uint64_t choices = static_cast<uint64_t>(ids_.size(0) - block_size_);
  std::vector<int64_t> out(static_cast<size_t>(batch_size_));
  for (int64_t b = 0; b < batch_size_; ++b) {
    const auto words = philox4x32(seed_, (static_cast<uint64_t>(step) << kWindowBits) | static_cast<uint64_t>(b));
    const uint64_t bits = (static_cast<uint64_t>(words[0]) << 32) | words[1];
    out[static_cast<size_t>(b)] = static_cast<int64_t>(below(choices, bits));
  }
  return out;
}

Batch TextWindows::batch(int64_t step) const {
  const std::vector<int64_t> starts = offsets(step);
  const int64_t T = block_size_;
  Tensor inputs({batch_size_, T}, DType::Int64);   // (B, T)
  Tensor targets({batch_size_, T}, DType::Int64);  // (B, T)
  const int64_t* src = ids_.data<int64_t>();       // (N)
  int64_t* in = inputs.data<int64_t>();
  int64_t* out = targets.data<int64_t>();
  for (int64_t b = 0; b < batch_size_; ++b) {
    const int64_t* window = src + starts[static_cast<size_t>(b)];
    std::memcpy(in + b * T, window, static_cast<size_t>(T) * sizeof(int64_t));
    std::memcpy(out + b * T, window + 1, static_cast<size_t>(T) * sizeof(int64_t));
  }
  return Batch{inputs, targets};
}

}  // namespace remat::data
