// Text data: tokenizer round trip and errors, split sizes, next-token
// blocks (consecutive, targets shifted by one, the tail left out), text files, and the real King James Bible where bible-kjv is
// installed (skipped otherwise).
#include "data/text_data.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
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

TEST(TextBlocks, ConsecutiveBlocksWithTargetsShiftedByOne) {
  const int64_t T = 16;
  const Dataset blocks = text_blocks(counting(5 * T + 3), T);  // 5 blocks; the tail of 2 is left out
  EXPECT_EQ(blocks.inputs.shape(), (Shape{5, T}));
  EXPECT_EQ(blocks.targets.shape(), (Shape{5, T}));
  EXPECT_EQ(blocks.inputs.dtype(), DType::Int64);
  const std::vector<int64_t> in = blocks.inputs.to_vector<int64_t>();
  const std::vector<int64_t> out = blocks.targets.to_vector<int64_t>();
  for (int64_t i = 0; i < 5 * T; ++i) {
    EXPECT_EQ(in[i], i);  // tokens are their own positions: block r starts at r * T
    EXPECT_EQ(out[i], i + 1);
  }
  // Exactly one block's worth and its target: one block; a token more than
  // five blocks' targets need: five, every token a target once.
  EXPECT_EQ(text_blocks(counting(T + 1), T).size(), 1);
  EXPECT_EQ(text_blocks(counting(5 * T + 1), T).size(), 5);
  EXPECT_EQ(text_blocks(counting(5 * T), T).size(), 4);
}

TEST(TextBlocks, Errors) {
  EXPECT_THROW(text_blocks(counting(8), 8), Error);  // needs block_size + 1 tokens
  EXPECT_NO_THROW(text_blocks(counting(9), 8));
  EXPECT_THROW(text_blocks(counting(100), 0), Error);
  EXPECT_THROW(text_blocks(zeros({100}), 8), Error);                               // float32 tokens
  EXPECT_THROW(text_blocks(counting(100).alias({10, 10}, {10, 1}, 0), 8), Error);  // two axes
  EXPECT_THROW(text_blocks(Tensor(), 8), Error);
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

// An empty file reached the tokenizer, whose "CharTokenizer: the text is
// empty" could not say which file; now the file is named.
TEST(TextFile, AnEmptyFileIsAnErrorNamingIt) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "remat_text_data_empty.txt";
  std::ofstream(path).close();
  try {
    load_text_file(path.string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("text file '" + path.string() + "' is empty"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
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
  const Dataset blocks = text_blocks(split.train, 128);
  EXPECT_EQ(blocks.size(), (split.train.numel() - 1) / 128);
  EXPECT_EQ(blocks.inputs.size(1), 128);
}

}  // namespace
}  // namespace remat::data
