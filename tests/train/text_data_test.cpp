// Text data: tokenizer round trip and errors, split sizes, random windows
// (targets are inputs shifted by one, offsets in range, reproducible, steps
// differ), text files, and the real King James Bible where bible-kjv is
// installed (skipped otherwise).
#include "train/text_data.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/factory.h"

namespace remat::data {
namespace {

// Tokens 0..n-1 as an int64 tensor (N): every window is a run of consecutive integers.
Tensor counting(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return from_vector(v, {n});
}

bool bible_installed() {
  return std::system("command -v bible >/dev/null 2>&1") == 0;
}

TEST(TextTokenizer, VocabularyIsSortedDistinctBytes) {
  const CharTokenizer tokenizer("hello, world");
  EXPECT_EQ(tokenizer.vocab_size(), 9);
  EXPECT_EQ(tokenizer.symbols(), " ,dehlorw");
}

TEST(TextTokenizer, IdsAreRanks) {
  const CharTokenizer tokenizer("cab");
  EXPECT_EQ(tokenizer.encode("abcab"), (std::vector<int64_t>{0, 1, 2, 0, 1}));
}

TEST(TextTokenizer, RoundTrip) {
  const std::string text = "In the beginning God created the heaven and the earth.\nAnd the earth was without form;";
  const CharTokenizer tokenizer(text);
  const std::vector<int64_t> ids = tokenizer.encode(text);
  ASSERT_EQ(ids.size(), text.size());
  for (const int64_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, tokenizer.vocab_size());
  }
  EXPECT_EQ(tokenizer.decode(ids), text);
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("the earth")), "the earth");
  EXPECT_EQ(tokenizer.encode(""), std::vector<int64_t>{});
  EXPECT_EQ(tokenizer.decode({}), "");
}

TEST(TextTokenizer, HighBytesRoundTrip) {
  const std::string text = std::string("a\x00z", 3) + "\xff\x80";
  const CharTokenizer tokenizer(text);
  EXPECT_EQ(tokenizer.vocab_size(), 5);
  EXPECT_EQ(tokenizer.encode(text), (std::vector<int64_t>{1, 0, 2, 4, 3}));
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), text);
}

TEST(TextTokenizer, UnknownByteNamesByteAndPosition) {
  const CharTokenizer tokenizer("abc");
  try {
    tokenizer.encode("abxc");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'x'"), std::string::npos) << message;
    EXPECT_NE(message.find("position 2"), std::string::npos) << message;
  }
}

TEST(TextTokenizer, Errors) {
  EXPECT_THROW(CharTokenizer(""), Error);
  const CharTokenizer tokenizer("abc");
  EXPECT_THROW(tokenizer.decode({0, 3}), Error);
  EXPECT_THROW(tokenizer.decode({-1}), Error);
}

TEST(TextSplit, SizesAndContents) {
  std::vector<int64_t> ids(1000);
  std::iota(ids.begin(), ids.end(), int64_t{0});
  const TextSplit split = split_text(ids);
  EXPECT_EQ(split.train.shape(), (Shape{900}));
  EXPECT_EQ(split.validation.shape(), (Shape{100}));
  EXPECT_EQ(split.train.dtype(), DType::Int64);
  EXPECT_EQ(split.validation.dtype(), DType::Int64);
  EXPECT_EQ(split.train.to_vector<int64_t>().front(), 0);
  EXPECT_EQ(split.train.to_vector<int64_t>().back(), 899);
  EXPECT_EQ(split.validation.to_vector<int64_t>().front(), 900);
  EXPECT_EQ(split.validation.to_vector<int64_t>().back(), 999);

  const TextSplit quarter = split_text(std::vector<int64_t>(10, 7), 0.25);  // 2.5 rounds down
  EXPECT_EQ(quarter.train.numel(), 8);
  EXPECT_EQ(quarter.validation.numel(), 2);

  const TextSplit none = split_text(ids, 0.0);
  EXPECT_EQ(none.train.numel(), 1000);
  EXPECT_EQ(none.validation.numel(), 0);
}

TEST(TextSplit, Errors) {
  const std::vector<int64_t> ids(10, 1);
  EXPECT_THROW(split_text(ids, 1.0), Error);
  EXPECT_THROW(split_text(ids, -0.1), Error);
}

TEST(TextWindows, TargetsAreInputsShiftedByOne) {
  const int64_t n = 500, T = 16, B = 8;
  const TextWindows windows(counting(n), T, B, /*seed=*/3);
  const Batch batch = windows.batch(0);
  EXPECT_EQ(batch.inputs.shape(), (Shape{B, T}));
  EXPECT_EQ(batch.targets.shape(), (Shape{B, T}));
  EXPECT_EQ(batch.inputs.dtype(), DType::Int64);
  EXPECT_EQ(batch.targets.dtype(), DType::Int64);
  const std::vector<int64_t> in = batch.inputs.to_vector<int64_t>();
  const std::vector<int64_t> out = batch.targets.to_vector<int64_t>();
  const std::vector<int64_t> offsets = windows.offsets(0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(in[b * T + t], offsets[b] + t);  // tokens are their own positions
      EXPECT_EQ(out[b * T + t], in[b * T + t] + 1);
    }
  }
}

TEST(TextWindows, OffsetsInRangeAndCoverTheText) {
  // A text of T + 3 tokens has exactly 3 windows: offsets 0, 1, 2.
  const int64_t T = 5;
  const TextWindows windows(counting(T + 3), T, 64, /*seed=*/1);
  std::set<int64_t> seen;
  for (int64_t step = 0; step < 20; ++step) {
    for (const int64_t o : windows.offsets(step)) {
      EXPECT_GE(o, 0);
      EXPECT_LE(o, 2);
      seen.insert(o);
    }
    const std::vector<int64_t> targets = windows.batch(step).targets.to_vector<int64_t>();
    for (const int64_t t : targets) EXPECT_LE(t, T + 2);  // never past the end
  }
  EXPECT_EQ(seen, (std::set<int64_t>{0, 1, 2}));

  // The shortest text: block_size + 1 tokens, one window at offset 0.
  const TextWindows tight(counting(T + 1), T, 4, /*seed=*/1);
  for (const int64_t o : tight.offsets(7)) EXPECT_EQ(o, 0);
}

TEST(TextWindows, ReproducibleAndStepsDiffer) {
  const Tensor ids = counting(100000);
  const TextWindows a(ids, 32, 16, /*seed=*/42);
  const TextWindows b(ids, 32, 16, /*seed=*/42);
  const TextWindows other_seed(ids, 32, 16, /*seed=*/43);
  EXPECT_EQ(a.batch(5).inputs.to_vector<int64_t>(), b.batch(5).inputs.to_vector<int64_t>());
  EXPECT_EQ(a.batch(5).targets.to_vector<int64_t>(), b.batch(5).targets.to_vector<int64_t>());
  // Pure in the step: asking for other steps first changes nothing.
  a.batch(0);
  a.batch(9);
  EXPECT_EQ(a.offsets(5), b.offsets(5));
  EXPECT_NE(a.offsets(5), a.offsets(6));
  EXPECT_NE(a.offsets(0), a.offsets(1));
  EXPECT_NE(a.offsets(5), other_seed.offsets(5));
}

TEST(TextWindows, Errors) {
  EXPECT_THROW(TextWindows(counting(8), 8, 2, 0), Error);  // needs block_size + 1 tokens
  EXPECT_NO_THROW(TextWindows(counting(9), 8, 2, 0));
  EXPECT_THROW(TextWindows(counting(100), 0, 2, 0), Error);
  EXPECT_THROW(TextWindows(counting(100), 8, 0, 0), Error);
  EXPECT_THROW(TextWindows(zeros({100}), 8, 2, 0), Error);          // float32 tokens
  EXPECT_THROW(TextWindows(counting(100).alias({10, 10}, {10, 1}, 0), 8, 2, 0), Error);  // two axes
  const TextWindows windows(counting(100), 8, 2, 0);
  EXPECT_THROW(windows.batch(-1), Error);
}

TEST(TextFile, LoadsBytesAndFailsOnMissingFile) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "remat_text_data_test.txt";
  const std::string contents = std::string("line one\nline two\n\x01", 19);
  {
    std::ofstream file(path, std::ios::binary);
    file << contents;
  }
  EXPECT_EQ(load_text_file(path.string()), contents);
  std::filesystem::remove(path);
  EXPECT_THROW(load_text_file(path.string()), Error);
}

TEST(TextKjv, MissingProgramNamesThePackage) {
  // An empty PATH hides `bible` whether or not it is installed.
  const char* old = std::getenv("PATH");
  const std::string saved = old ? old : "";
  ::setenv("PATH", "/nonexistent-remat-test-dir", 1);
  std::string message;
  try {
    load_kjv();
  } catch (const Error& e) {
    message = e.what();
  }
  if (old) ::setenv("PATH", saved.c_str(), 1); else ::unsetenv("PATH");
  EXPECT_NE(message.find("bible-kjv"), std::string::npos) << "message: " << message;
}

TEST(TextKjv, LoadsTheWholeBible) {
  if (!bible_installed()) GTEST_SKIP() << "the `bible` program is missing; apt-get install bible-kjv";
  const std::string text = load_kjv();
  EXPECT_GT(text.size(), 4000000u);
  EXPECT_EQ(text.substr(0, text.find('\n')), "In the beginning God created the heaven and the earth.");
  const std::string last = "The grace of our Lord Jesus Christ be with you all. Amen.\n";
  ASSERT_GE(text.size(), last.size());
  EXPECT_EQ(text.substr(text.size() - last.size()), last);

  // Byte for byte what the documented shell pipeline prints.
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "remat_text_data_test_kjv.txt";
  const std::string pipeline = "bible -f gen1:1-rev22:21 </dev/null | sed 's/^[^ ]* //' > " + path.string();
  ASSERT_EQ(std::system(pipeline.c_str()), 0) << pipeline;
  const std::string expected = load_text_file(path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(text.size(), expected.size());
  EXPECT_TRUE(text == expected) << "load_kjv() differs from `" << pipeline << "`";

  const CharTokenizer tokenizer(text);
  EXPECT_EQ(tokenizer.vocab_size(), 63);
  for (const char c : tokenizer.symbols()) EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << int{c};
  const std::vector<int64_t> ids = tokenizer.encode(text);
  EXPECT_EQ(tokenizer.decode(std::vector<int64_t>(ids.begin(), ids.begin() + 1000)), text.substr(0, 1000));

  const TextSplit split = split_text(ids);
  EXPECT_EQ(split.train.numel() + split.validation.numel(), static_cast<int64_t>(text.size()));
  const TextWindows windows(split.train, 128, 16, /*seed=*/0);
  EXPECT_EQ(windows.batch(0).inputs.shape(), (Shape{16, 128}));
}

}  // namespace
}  // namespace remat::data
