// libFuzzer target: data/text_data.h's load_text_file and CharTokenizer on
// arbitrary bytes. The file reads back byte for byte; a text's vocabulary is
// its distinct bytes in order, encode then decode gives the text back, and
// split_text's two parts hold every id. Seeds: fuzz/corpus/text_fuzz/.
#include <set>

#include "fuzz/fuzz_input.h"
#include "data/text_data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static remat::fuzz::InputFile file("text");
  const std::string& path = file.write(data, size);
  remat::fuzz::expect_result_or_error("text", [&] {
    const std::string text = remat::data::load_text_file(path);
    FUZZ_CHECK(text == std::string_view(reinterpret_cast<const char*>(data), size), "read {} of {} bytes back",
               text.size(), size);
    const remat::data::CharTokenizer tokenizer(text);
    const std::set<unsigned char> distinct(text.begin(), text.end());
    FUZZ_CHECK(tokenizer.vocab_size() == static_cast<int64_t>(distinct.size()), "vocabulary of {} for {} bytes",
               tokenizer.vocab_size(), distinct.size());
    const std::vector<int64_t> ids = tokenizer.encode(text);
    FUZZ_CHECK(tokenizer.decode(ids) == text, "encode then decode changed the text");
    const remat::data::TextSplit split = remat::data::split_text(ids, 0.1);
    FUZZ_CHECK(split.train.numel() + split.validation.numel() == static_cast<int64_t>(ids.size()),
               "split {} + {} of {} ids", split.train.numel(), split.validation.numel(), ids.size());
  });
  return 0;
}
