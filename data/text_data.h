// Text data for character-level language models: the King James Bible from
// Debian's bible-kjv (or any text file), a byte-level tokenizer, a
// train/validation split and its next-token blocks as a Dataset. Nothing
// here touches autograd; the kjv-gpt task and the CLI call it.
//
//   const std::string text = data::load_kjv();
//   const data::CharTokenizer tokenizer(text);                   // 63 symbols
//   auto [train, validation] = data::split_text(tokenizer.encode(text));
//   const data::Dataset blocks = data::text_blocks(train, /*block_size=*/128);
//   data::DataLoader loader(blocks, {.batch_size = 32, .shuffle = true});
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tensor.h"
#include "data/data_loader.h"

namespace remat::data {

// The whole King James Bible, Genesis 1:1 to Revelation 22:21, one verse per
// line without its reference ("In the beginning God created the heaven and
// the earth.\n..."): about 4.1 MB of ASCII with 63 distinct bytes, the same
// every run. Runs `bible -f gen1:1-rev22:21 </dev/null | sed 's/^[^ ]* //'`.
// Errors: the `bible` program is missing (names the package bible-kjv), the
// command exits non-zero, or it prints nothing.
std::string load_kjv();

// The bytes of the file at `path`. Errors: missing, unreadable or empty file
// (each names `path`).
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

// The text cut into consecutive blocks for next-token prediction, as
// Hugging Face's run_clm groups texts: row i of inputs is
// ids[i*T : i*T + T] and of targets ids[i*T + 1 : i*T + T + 1], for the
// R = floor((N - 1) / T) blocks that fit (a shorter tail is left out). So an
// epoch of a shuffled DataLoader over them predicts every token once.
// `ids` (N) int64 on the CPU. Errors: N < T + 1, T not positive, another
// dtype, shape or device.
Dataset text_blocks(const Tensor& ids, int64_t block_size);

}  // namespace remat::data
