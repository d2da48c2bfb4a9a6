// Fashion-MNIST reader: exact values from small synthetic IDX files written
// here (gzip, through zlib), every malformed-file error, and the Debian
// dataset itself where the package is installed.
#include "data/fashion_mnist.h"

#include <gtest/gtest.h>

#include "engine/allocator.h"
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "engine/error.h"

namespace remat::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

void append_be32(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<unsigned char>(v >> shift));
}

// An IDX images file: header, then the pixels as given.
Bytes images_idx(uint32_t count, uint32_t rows, uint32_t cols, const Bytes& pixels, uint32_t magic = 0x803) {
  Bytes out;
  append_be32(out, magic);
  append_be32(out, count);
  append_be32(out, rows);
  append_be32(out, cols);
  out.insert(out.end(), pixels.begin(), pixels.end());
  return out;
}

Bytes labels_idx(uint32_t count, const Bytes& labels, uint32_t magic = 0x801) {
  Bytes out;
  append_be32(out, magic);
  append_be32(out, count);
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

// Pixel p of image i: a pattern that covers 0..255.
Bytes pattern(int64_t count, int64_t pixels) {
  Bytes out;
  for (int64_t i = 0; i < count; ++i)
    for (int64_t p = 0; p < pixels; ++p) out.push_back(static_cast<unsigned char>((i * 37 + p * 11) % 256));
  return out;
}

// Runs f, expects a remat::Error, and checks that its message holds each part.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected remat::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message << "\nlacks: " << part;
  }
}

class FashionMnistFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("remat_fashion_mnist_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes `bytes` gzip-compressed to dir/name and returns its path.
  std::string write_gz(const std::string& name, const Bytes& bytes) const {
    const std::string p = path(name);
    gzFile f = gzopen(p.c_str(), "wb");
    EXPECT_NE(f, nullptr) << p;
    if (!bytes.empty()) {
      EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    }
    gzclose(f);
    return p;
  }

  // A well-formed split of `count` 28x28 images with the given labels.
  void write_split(const std::string& prefix, const Bytes& labels) const {
    const auto n = static_cast<uint32_t>(labels.size());
    write_gz(prefix + "-images-idx3-ubyte.gz", images_idx(n, 28, 28, pattern(n, 784)));
    write_gz(prefix + "-labels-idx1-ubyte.gz", labels_idx(n, labels));
  }

  fs::path dir_;
};

TEST_F(FashionMnistFiles, LoadsExactValues) {
  write_split("train", {9, 0, 3});
  const Dataset d = load_fashion_mnist("train", dir_.string());
  EXPECT_EQ(d.inputs.shape(), (Shape{3, 784}));
  EXPECT_EQ(d.inputs.dtype(), DType::Float32);
  EXPECT_EQ(d.targets.shape(), (Shape{3}));
  EXPECT_EQ(d.targets.dtype(), DType::Int64);
  EXPECT_EQ(d.size(), 3);
  EXPECT_EQ(d.targets.to_vector<int64_t>(), (std::vector<int64_t>{9, 0, 3}));
  const Bytes bytes = pattern(3, 784);
  const std::vector<float> values = d.inputs.to_vector<float>();
  ASSERT_EQ(values.size(), bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) ASSERT_EQ(values[i], static_cast<float>(bytes[i]) / 255.0f) << i;
}

TEST_F(FashionMnistFiles, TestSplitReadsT10kFiles) {
  write_split("t10k", {1, 2});
  const Dataset d = load_fashion_mnist("test", dir_.string());
  EXPECT_EQ(d.inputs.shape(), (Shape{2, 784}));
  EXPECT_EQ(d.targets.to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
}

TEST_F(FashionMnistFiles, SmallImagesScaleToUnitRange) {
  const std::string p = write_gz("tiny.gz", images_idx(2, 2, 3, {0, 255, 51, 102, 1, 254, 10, 20, 30, 40, 50, 60}));
  const Tensor images = read_idx_images(p, 2, 3);
  EXPECT_EQ(images.shape(), (Shape{2, 6}));
  const std::vector<float> v = images.to_vector<float>();
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(v[1], 1.0f);
  EXPECT_EQ(v[2], 51.0f / 255.0f);
  EXPECT_EQ(v[3], 102.0f / 255.0f);
  EXPECT_EQ(v[11], 60.0f / 255.0f);
}

TEST_F(FashionMnistFiles, EmptySplitIsAllowed) {
  write_split("train", {});
  const Dataset d = load_fashion_mnist("train", dir_.string());
  EXPECT_EQ(d.inputs.shape(), (Shape{0, 784}));
  EXPECT_EQ(d.targets.shape(), (Shape{0}));
}

TEST_F(FashionMnistFiles, UncompressedFileReadsToo) {
  const std::string p = path("plain-labels");
  const Bytes bytes = labels_idx(2, {4, 5});
  FILE* f = std::fopen(p.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  EXPECT_EQ(read_idx_labels(p).to_vector<int64_t>(), (std::vector<int64_t>{4, 5}));
}

TEST_F(FashionMnistFiles, MissingFileNamesFullPathAndPackage) {
  const std::string images = path("train-images-idx3-ubyte.gz");
  expect_error([&] { load_fashion_mnist("train", dir_.string()); },
               {images, "apt-get install dataset-fashion-mnist"});
  // The labels file is checked too, even when the images are there.
  write_gz("t10k-images-idx3-ubyte.gz", images_idx(1, 28, 28, pattern(1, 784)));
  expect_error([&] { load_fashion_mnist("test", dir_.string()); },
               {path("t10k-labels-idx1-ubyte.gz"), "apt-get install dataset-fashion-mnist"});
  expect_error([&] { read_idx_labels(path("nothing.gz")); }, {path("nothing.gz"), "not found"});
}

TEST_F(FashionMnistFiles, UnknownSplit) {
  expect_error([&] { load_fashion_mnist("validation", dir_.string()); }, {"\"validation\"", "\"train\"", "\"test\""});
}

TEST_F(FashionMnistFiles, WrongMagicNumber) {
  // A labels file where images are expected, and the other way round.
  const std::string labels = write_gz("labels.gz", labels_idx(1, {3}));
  expect_error([&] { read_idx_images(labels); }, {labels, "0x00000801", "0x00000803"});
  const std::string images = write_gz("images.gz", images_idx(1, 28, 28, pattern(1, 784)));
  expect_error([&] { read_idx_labels(images); }, {images, "0x00000803", "0x00000801"});
  const std::string other = write_gz("float.gz", labels_idx(1, {3}, 0x00000d01));
  expect_error([&] { read_idx_labels(other); }, {other, "0x00000d01"});
}

TEST_F(FashionMnistFiles, WrongImageDimensions) {
  const std::string p = write_gz("train-images-idx3-ubyte.gz", images_idx(1, 27, 28, pattern(1, 27 * 28)));
  write_gz("train-labels-idx1-ubyte.gz", labels_idx(1, {0}));
  expect_error([&] { load_fashion_mnist("train", dir_.string()); }, {p, "27 x 28", "expected 28 x 28"});
}

TEST_F(FashionMnistFiles, TruncatedImages) {
  // The header promises 3 images; 2 and a half follow.
  const std::string p = write_gz("images.gz", images_idx(3, 28, 28, pattern(1, 2 * 784 + 392)));
  expect_error([&] { read_idx_images(p); }, {p, "truncated", "expected 2352 bytes", "found 1960"});
}

// Found by fuzz/idx_fuzz: a 16-byte file whose header declares 2^31 - 1
// images made the reader allocate what it declared (1.7 TB: std::bad_alloc,
// or a sanitizer's allocation-size error) before finding the file short.
TEST_F(FashionMnistFiles, CountBeyondTheFileIsTruncatedNotAllocated) {
  const std::string p = write_gz("images.gz", images_idx(0x7fffffff, 28, 28, {}));
  expect_error([&] { read_idx_images(p); }, {p, "truncated", "expected 1683627179248 bytes", "found 0"});
  const std::string q = write_gz("labels.gz", labels_idx(0x7fffffff, {1, 2}));
  expect_error([&] { read_idx_labels(q); }, {q, "truncated", "expected 2147483647 bytes", "found 2"});
}

TEST_F(FashionMnistFiles, TruncatedLabels) {
  const std::string p = write_gz("labels.gz", labels_idx(5, {1, 2, 3}));
  expect_error([&] { read_idx_labels(p); }, {p, "truncated", "expected 5 bytes", "found 3"});
}

TEST_F(FashionMnistFiles, TruncatedHeader) {
  const std::string p = write_gz("header.gz", Bytes{0, 0, 8, 3, 0, 0});
  expect_error([&] { read_idx_images(p); }, {p, "truncated", "image count"});
  const std::string empty = write_gz("empty.gz", Bytes{});
  expect_error([&] { read_idx_labels(empty); }, {empty, "truncated", "magic number"});
}

TEST_F(FashionMnistFiles, TrailingBytes) {
  const std::string p = write_gz("labels.gz", labels_idx(2, {1, 2, 3}));
  expect_error([&] { read_idx_labels(p); }, {p, "more bytes than its header declares", "10 bytes"});
}

TEST_F(FashionMnistFiles, CorruptGzipStream) {
  // A valid gzip file with its deflate data damaged in the middle.
  Bytes noise;  // incompressible, so the damage lands inside the deflate data
  uint32_t state = 12345;
  for (int i = 0; i < 4096; ++i) noise.push_back(static_cast<unsigned char>((state = state * 1664525u + 1013904223u) >> 24));
  const std::string p = write_gz("labels.gz", labels_idx(4096, noise));
  {
    FILE* f = std::fopen(p.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 1000, SEEK_SET);
    const unsigned char junk[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    std::fwrite(junk, 1, sizeof junk, f);
    std::fclose(f);
  }
  expect_error([&] { read_idx_labels(p, 256); }, {p});
}

TEST_F(FashionMnistFiles, LabelOutOfRange) {
  write_gz("train-images-idx3-ubyte.gz", images_idx(3, 28, 28, pattern(3, 784)));
  const std::string p = write_gz("train-labels-idx1-ubyte.gz", labels_idx(3, {0, 9, 10}));
  expect_error([&] { load_fashion_mnist("train", dir_.string()); }, {p, "label 10 of item 2", "0..9"});
}

TEST_F(FashionMnistFiles, ImageAndLabelCountsDiffer) {
  const std::string images = write_gz("train-images-idx3-ubyte.gz", images_idx(3, 28, 28, pattern(3, 784)));
  const std::string labels = write_gz("train-labels-idx1-ubyte.gz", labels_idx(2, {0, 1}));
  expect_error([&] { load_fashion_mnist("train", dir_.string()); },
               {images, "3 images", labels, "2 labels"});
}

// The Debian package's files, where installed: shapes, ranges, known values.
bool have_dataset() {
  return fs::exists(std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz") &&
         fs::exists(std::string(kFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz");
}

void expect_label_range(const Tensor& targets) {
  std::vector<int64_t> counts(kFashionMnistClasses, 0);
  for (int64_t y : targets.to_vector<int64_t>()) {
    ASSERT_GE(y, 0);
    ASSERT_LT(y, kFashionMnistClasses);
    ++counts[static_cast<size_t>(y)];
  }
  // Fashion-MNIST is balanced: every class has exactly a tenth of the split.
  for (int64_t c : counts) EXPECT_EQ(c, targets.numel() / kFashionMnistClasses);
}

TEST(FashionMnistDebian, TrainSplit) {
  if (!have_dataset()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const Dataset d = load_fashion_mnist("train");
  EXPECT_EQ(d.inputs.shape(), (Shape{60000, 784}));
  EXPECT_EQ(d.targets.shape(), (Shape{60000}));
  const std::vector<int64_t> labels = d.targets.to_vector<int64_t>();
  EXPECT_EQ((std::vector<int64_t>(labels.begin(), labels.begin() + 5)), (std::vector<int64_t>{9, 0, 0, 3, 0}));
  expect_label_range(d.targets);
  const std::vector<float> pixels = d.inputs.to_vector<float>();
  float low = 1, high = 0;
  for (float v : pixels) low = std::min(low, v), high = std::max(high, v);
  EXPECT_EQ(low, 0.0f);
  EXPECT_EQ(high, 1.0f);
  // Row 14 of the first image (an ankle boot), pixels 10..13: bytes 0, 0, 237, 226.
  EXPECT_EQ(pixels[14 * 28 + 12], 237.0f / 255.0f);
  EXPECT_EQ(pixels[14 * 28 + 13], 226.0f / 255.0f);
  EXPECT_EQ(pixels[14 * 28 + 11], 0.0f);
}

TEST(FashionMnistDebian, TestSplit) {
  if (!have_dataset()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const int64_t data_before = cpu_allocator().stats().live_of(MemoryCategory::Data);
  const Dataset d = load_fashion_mnist("test");
  // A dataset's bytes are Data, never activations of a step.
  EXPECT_EQ(cpu_allocator().stats().live_of(MemoryCategory::Data) - data_before, 10000 * 784 * 4 + 10000 * 8);
  EXPECT_EQ(d.inputs.shape(), (Shape{10000, 784}));
  EXPECT_EQ(d.targets.shape(), (Shape{10000}));
  const std::vector<int64_t> labels = d.targets.to_vector<int64_t>();
  EXPECT_EQ((std::vector<int64_t>(labels.begin(), labels.begin() + 5)), (std::vector<int64_t>{9, 2, 1, 1, 6}));
  expect_label_range(d.targets);
}

}  // namespace
}  // namespace remat::data
