// Text data for character-level language models: the King James Bible from
// Debian's bible-kjv (or any text file), a byte-level tokenizer, a
// train/validation split and random next-token windows. Nothing here touches
// autograd; the kjv-gpt task and the CLI call it.
//
//   const std::string text = data::load_kjv();
//   const data::CharTokenizer tokenizer(text);                   // 63 symbols
//   auto [train, validation] = data::split_text(tokenizer.encode(text));
//   const data::TextWindows windows(train, /*block_size=*/128, /*batch_size=*/16, /*seed=*/1);
//   for (int64_t step = 0; step < steps; ++step) { data::Batch b = windows.batch(step); ... }
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tensor.h"
#include "train/data_loader.h"

namespace remat::data {

// The whole King James Bible, Genesis 1:1 to Revelation 22:21, one verse per
// line without its reference ("In the beginning God created the heaven and
// the earth.\n..."): about 4.1 MB of ASCII with 63 distinct bytes, the same
// every run. Runs `bible -f gen1:1-rev22:21 </dev/null | sed 's/^[^ ]* //'`.
// Errors: the `bible` program is missing (names the package bible-kjv), the
// command exits non-zero, or it prints nothing.
std::string load_kjv();

// The bytes of the file at `path`. Errors: missing or unreadable file.
std::string load_text_file(const std::string& path);

// A 64-bit fingerprint of some bytes (FNV-1a): the identity of a run's
// training text in its checkpoints, and of a setting in the ranks' check.
uint64_t fingerprint(std::string_view bytes);

// Maps each distinct byte of a text to an id: its rank among the text's
// distinct bytes sorted by value. So the vocabulary of a text is fixed by the
// text alone, whatever order its bytes come in.
class CharTokenizer {
 public:
  // Errors: an empty text (no vocabulary).
  explicit CharTokenizer(std::string_view text);

  int64_t vocab_size() const { return static_cast<int64_t>(symbols_.size()); }
  // The distinct bytes in id order.
  const std::string& symbols() const { return symbols_; }

  // Ids of the bytes of `text`, in order. Errors: a byte not in the
  // vocabulary (names the byte and its position).
  std::vector<int64_t> encode(std::string_view text) const;
  // The bytes of `ids`. Errors: an id outside 0..vocab_size()-1.
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  std::string symbols_;  // id -> byte
  int ids_[256];         // byte -> id, -1 where the byte is not in the vocabulary
};

struct TextSplit {
  Tensor train;       // (N - n_validation) int64
  Tensor validation;  // (n_validation) int64, the end of the text
};

// The first part of `ids` for training and the last `validation_fraction` of
// it (rounded down) for validation. Errors: a fraction outside [0, 1).
TextSplit split_text(const std::vector<int64_t>& ids, double validation_fraction = 0.1);

// Random windows of a token sequence for next-token prediction. Window b of
// step s starts at an offset drawn from Philox with the seed as key and
// (s, b) in the counter, so batch(step) is a pure function of (seed, step):
// no state, any step can be replayed (e.g. after resuming a checkpoint).
class TextWindows {
 public:
  // `ids` (N) int64. Errors: N < block_size + 1 (no window with a target for
  // every position), block_size or batch_size not positive, wrong dtype/rank.
  TextWindows(Tensor ids, int64_t block_size, int64_t batch_size, uint64_t seed);

  // inputs (B, T) = ids[o_b : o_b + T], targets (B, T) = ids[o_b + 1 : o_b + T + 1],
  // with offsets o_b in [0, N - T - 1]. Errors: step outside 0..2^32-1.
  Batch batch(int64_t step) const;
  // The B window offsets of batch(step).
  std::vector<int64_t> offsets(int64_t step) const;

  int64_t block_size() const { return block_size_; }
  int64_t batch_size() const { return batch_size_; }
  uint64_t seed() const { return seed_; }
  const Tensor& ids() const { return ids_; }

 private:
  Tensor ids_;  // (N) int64, contiguous
  int64_t block_size_;
  int64_t batch_size_;
  uint64_t seed_;
};

}  // namespace remat::data
