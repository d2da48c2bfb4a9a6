// Safetensors: an MLP round trip (bit-identical), exact bytes of a written
// file, a hand-built file read back, every validation error of load (each
// leaving all parameters unchanged), writer errors, and (only where
// /usr/bin/python3 has numpy) NumPy reading our file.
#include "nn/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "engine/rng.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/files.h"

namespace remat::nn {
namespace {

namespace fs = std::filesystem;

using remat::testing::error_of;

template <class T> std::string bytes_of(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::string u64_bytes(uint64_t n) { return bytes_of(std::vector<uint64_t>{n}); }

// A file as the format lays it out: length, header padded to 8, body.
std::string file_of(std::string header, const std::string& body) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return u64_bytes(header.size()) + header + body;
}

using testing::read_file;
using testing::write_file;

// The raw bytes of a tensor: "bit-identical" compares these.
std::string raw_bytes(const Tensor& t) {
  const Tensor d = dense(t);
  return std::string(static_cast<const char*>(d.raw_data()), d.nbytes());
}

// w (2, 3) = 1..6 and b (3) = 10, 20, 30.
class PairModule : public Module {
 public:
  PairModule() {
    w = register_parameter("w", from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}));
    b = register_parameter("b", from_vector(std::vector<float>{10, 20, 30}, {3}));
  }
  std::string_view type_name() const override { return "Pair"; }
  Tensor w, b;
};

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("remat_safetensors_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Loads `bytes` (written to a file) into a fresh PairModule and expects an error
  // containing every one of `parts`, with w and b and their versions unchanged.
  void expect_load_fails(const std::string& bytes, const std::vector<std::string>& parts) {
    const std::string file = path("bad.safetensors");
    write_file(file, bytes);
    PairModule pair;
    const uint64_t w_version = pair.w.storage()->version();
    const uint64_t b_version = pair.b.storage()->version();
    const std::string message = error_of([&] { load_safetensors(pair, file); });
    EXPECT_NE(message, "no error");
    EXPECT_NE(message.find(file), std::string::npos) << message;
    for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
    EXPECT_EQ(pair.w.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(pair.b.to_vector<float>(), (std::vector<float>{10, 20, 30}));
    EXPECT_EQ(pair.w.storage()->version(), w_version);
    EXPECT_EQ(pair.b.storage()->version(), b_version);
  }

  // The names in the test's folder, sorted.
  std::vector<std::string> files_in_dir() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
};

// The header of a valid file for PairModule, with values w = 7..12, b = -1, -2, -3.
const std::string kPairHeader =
    R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":{"dtype":"F32","shape":[3],"data_offsets":[24,36]}})";
std::string pair_body() { return bytes_of(std::vector<float>{7, 8, 9, 10, 11, 12, -1, -2, -3}); }

TEST_F(Safetensors, MlpRoundTripIsBitIdentical) {
  Generator g1(1), g2(2);
  MLP saved({5, 7, 3}, g1);
  MLP loaded({5, 7, 3}, g2);
  ASSERT_NE(raw_bytes(saved.named_parameters()[0].second), raw_bytes(loaded.named_parameters()[0].second));
  const std::string file = path("mlp.safetensors");
  save_safetensors(saved, file, {{"step", "42"}});
  EXPECT_EQ(files_in_dir(), std::vector<std::string>{"mlp.safetensors"});  // no temporary file left

  const auto in_file = read_safetensors(file);
  const auto params = saved.named_parameters();
  ASSERT_EQ(in_file.size(), 4u);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(in_file[i].first, params[i].first);  // names, in named_parameters() order
    EXPECT_EQ(in_file[i].second.shape(), params[i].second.shape());
    EXPECT_EQ(raw_bytes(in_file[i].second), raw_bytes(params[i].second));
  }
  EXPECT_EQ(read_safetensors_metadata(file), (SafetensorsMetadata{{"step", "42"}}));

  const uint64_t version = loaded.parameters()[0].storage()->version();
  load_safetensors(loaded, file);
  const auto got = loaded.named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(got[i].first, params[i].first);
    EXPECT_EQ(raw_bytes(got[i].second), raw_bytes(params[i].second)) << got[i].first;
    EXPECT_TRUE(got[i].second.requires_grad());  // still the same leaf parameters
  }
  EXPECT_EQ(loaded.parameters()[0].storage()->version(), version + 1);
}

TEST_F(Safetensors, WrittenBytesAreExact) {
  const std::string file = path("x.safetensors");
  write_safetensors(file, {{"x", from_vector(std::vector<float>{1.5f, -2.0f}, {1, 2})}}, {{"k", "v"}});
  // 81 characters of JSON padded with seven spaces to 88; 8 + 88 is a multiple of 8.
  const std::string header = R"({"__metadata__":{"k":"v"},"x":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}})";
  ASSERT_EQ(header.size(), 81u);
  const std::string expected = u64_bytes(88) + header + std::string(7, ' ') + bytes_of(std::vector<float>{1.5f, -2.0f});
  EXPECT_EQ(read_file(file), expected);
}

TEST_F(Safetensors, HandBuiltFileReadsBackExactly) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I64","shape":[2,1],"data_offsets":[8,24]},"c":{"dtype":"F64","shape":[],"data_offsets":[24,32]},)"
      R"("d":{"dtype":"F32","shape":[0,3],"data_offsets":[32,32]}})";
  const std::string body = bytes_of(std::vector<float>{0.1f, -3.5f}) + bytes_of(std::vector<int64_t>{7, -9000000000}) +
                           bytes_of(std::vector<double>{0.1});
  const std::string file = path("hand.safetensors");
  write_file(file, file_of(header, body));

  const auto tensors = read_safetensors(file);
  ASSERT_EQ(tensors.size(), 4u);
  EXPECT_EQ(tensors[0].first, "a");
  EXPECT_EQ(tensors[0].second.dtype(), DType::Float32);
  EXPECT_EQ(tensors[0].second.to_vector<float>(), (std::vector<float>{0.1f, -3.5f}));
  EXPECT_EQ(tensors[1].first, "b");
  EXPECT_EQ(tensors[1].second.dtype(), DType::Int64);
  EXPECT_EQ(tensors[1].second.shape(), (Shape{2, 1}));
  EXPECT_EQ(tensors[1].second.to_vector<int64_t>(), (std::vector<int64_t>{7, -9000000000}));
  EXPECT_EQ(tensors[2].first, "c");
  EXPECT_EQ(tensors[2].second.shape(), Shape{});
  EXPECT_EQ(tensors[2].second.item<double>(), 0.1);
  EXPECT_EQ(tensors[3].second.shape(), (Shape{0, 3}));
  EXPECT_FALSE(tensors[0].second.requires_grad());
  EXPECT_EQ(read_safetensors_metadata(file), (SafetensorsMetadata{{"format", "pt"}}));
}

TEST_F(Safetensors, HandBuiltFileLoadsIntoModule) {
  const std::string file = path("pair.safetensors");
  write_file(file, file_of(kPairHeader, pair_body()));
  PairModule pair;
  load_safetensors(pair, file);
  EXPECT_EQ(pair.w.to_vector<float>(), (std::vector<float>{7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(pair.b.to_vector<float>(), (std::vector<float>{-1, -2, -3}));
}

TEST_F(Safetensors, StridedViewIsWrittenDense) {
  const Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  const std::string file = path("t.safetensors");
  write_safetensors(file, {{"xt", transpose(x, 0, 1)}});
  const auto back = read_safetensors(file);
  EXPECT_EQ(back.at(0).second.shape(), (Shape{3, 2}));
  EXPECT_EQ(back.at(0).second.to_vector<double>(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
}

TEST_F(Safetensors, WrongShapeLeavesParametersUnchanged) {
  const std::string header =
      R"({"w":{"dtype":"F32","shape":[3,2],"data_offsets":[0,24]},"b":{"dtype":"F32","shape":[3],"data_offsets":[24,36]}})";
  expect_load_fails(file_of(header, pair_body()), {"'w'", "shape (3, 2) in file, (2, 3) in model"});
}

TEST_F(Safetensors, WrongDtypeLeavesParametersUnchanged) {
  const std::string header =
      R"({"w":{"dtype":"F64","shape":[2,3],"data_offsets":[0,48]},"b":{"dtype":"F32","shape":[3],"data_offsets":[48,60]}})";
  const std::string body = bytes_of(std::vector<double>(6, 0.5)) + bytes_of(std::vector<float>{1, 2, 3});
  expect_load_fails(file_of(header, body), {"'w'", "dtype F64 in file, F32 in model"});
}

TEST_F(Safetensors, MissingNameLeavesParametersUnchanged) {
  // Only w; b is missing. w comes first, so a loader that copied as it went would have changed it.
  const std::string header = R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  expect_load_fails(file_of(header, bytes_of(std::vector<float>{7, 8, 9, 10, 11, 12})), {"missing", "'b'"});
}

TEST_F(Safetensors, TruncatedBodyLeavesParametersUnchanged) {
  std::string bytes = file_of(kPairHeader, pair_body());
  bytes.resize(bytes.size() - 4);
  expect_load_fails(bytes, {"truncated", "'b'", "ends at byte 36", "only 32 bytes"});
}

TEST_F(Safetensors, BadHeaderJsonLeavesParametersUnchanged) {
  expect_load_fails(file_of(R"({"w": {"dtype": "F32", "shape": [2, 3)", pair_body()), {"not valid JSON"});
}

TEST_F(Safetensors, HeaderLengthBeyondFileLeavesParametersUnchanged) {
  std::string bytes = file_of(kPairHeader, pair_body());
  const std::string huge = u64_bytes(1ull << 40);
  bytes.replace(0, 8, huge);
  expect_load_fails(bytes, {"header length 1099511627776", "beyond the file of " + std::to_string(bytes.size())});
}

TEST_F(Safetensors, UnusedNameIsAnErrorUnlessAllowed) {
  const std::string header =
      R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":{"dtype":"F32","shape":[3],"data_offsets":[24,36]},)"
      R"("extra":{"dtype":"I64","shape":[1],"data_offsets":[36,44]}})";
  const std::string bytes = file_of(header, pair_body() + bytes_of(std::vector<int64_t>{5}));
  expect_load_fails(bytes, {"'extra'", "no parameter", "allow_unused"});

  PairModule pair;
  load_safetensors(pair, path("bad.safetensors"), {.allow_unused = true});
  EXPECT_EQ(pair.w.to_vector<float>(), (std::vector<float>{7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(pair.b.to_vector<float>(), (std::vector<float>{-1, -2, -3}));
}

TEST_F(Safetensors, DuplicateNameLeavesParametersUnchanged) {
  const std::string header =
      R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":{"dtype":"F32","shape":[3],"data_offsets":[24,36]},)"
      R"("w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  expect_load_fails(file_of(header, pair_body()), {"'w' appears twice"});
}

TEST_F(Safetensors, InconsistentOffsetsLeaveParametersUnchanged) {
  // w's offsets hold 20 bytes where (2, 3) floats need 24.
  expect_load_fails(file_of(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]},)"
                            R"("b":{"dtype":"F32","shape":[3],"data_offsets":[24,36]}})",
                            pair_body()),
                    {"'w'", "[0, 20] hold 20 bytes", "need 24"});
  // b overlaps w.
  expect_load_fails(file_of(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                            R"("b":{"dtype":"F32","shape":[3],"data_offsets":[20,32]}})",
                            pair_body()),
                    {"'b'", "overlaps tensor 'w'"});
  // A 4-byte gap between w and b.
  expect_load_fails(file_of(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                            R"("b":{"dtype":"F32","shape":[3],"data_offsets":[28,40]}})",
                            pair_body() + std::string(4, '\0')),
                    {"'b'", "gap after byte 24"});
  // Bytes after the last tensor.
  expect_load_fails(file_of(kPairHeader, pair_body() + std::string(8, '\0')), {"body has 44 bytes", "cover only 36"});
  // end before begin.
  expect_load_fails(file_of(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[24,0]}})", pair_body()),
                    {"'w'", "[24, 0]"});
}

TEST_F(Safetensors, MalformedEntriesLeaveParametersUnchanged) {
  expect_load_fails(file_of(R"({"w":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,24]}})", pair_body()),
                    {"'w'", "non-negative integer", "-3"});
  expect_load_fails(file_of(R"({"w":{"dtype":"F32","data_offsets":[0,24]}})", pair_body()), {"'w'", "\"shape\""});
  expect_load_fails(file_of(R"([1, 2])", ""), {"must be a JSON object"});
  expect_load_fails(file_of(R"({"__metadata__":{"n":1}})", ""), {"__metadata__", "'n'", "must be a string"});
  expect_load_fails(file_of(R"({"w":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}})", std::string(1, '\0')),
                    {"'w'", "unknown dtype 'Q7'"});
}

TEST_F(Safetensors, Float16IsNotSupportedYet) {
  expect_load_fails(file_of(R"({"w":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]}})", std::string(12, '\0')),
                    {"'w'", "dtype F16", "not supported yet"});
  const std::string message = error_of([&] {
    write_safetensors(path("h.safetensors"), {{"h", Tensor({2}, DType::Float16)}});
  });
  EXPECT_NE(message.find("'h' has dtype F16 (float16), which is not supported yet"), std::string::npos) << message;
}

// bfloat16 b of float32 f: f's upper 16 bits.
std::vector<uint16_t> bfloat16_of(const std::vector<float>& values) {
  std::vector<uint16_t> out;
  for (float f : values) {
    uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    out.push_back(static_cast<uint16_t>(bits >> 16));
  }
  return out;
}

// A BF16 file reads as bfloat16 tensors, loads into a float32 or float64
// model only when widening is asked for, and then exactly; F64 never
// narrows into float32.
TEST_F(Safetensors, Bfloat16FilesReadAndWidenExactly) {
  // Values a bfloat16 holds exactly: 1.5 2^120, and a subnormal float32 (2^-130).
  const std::vector<float> w{1.5f, -2.25f, 0.0f, std::ldexp(1.5f, 120), std::ldexp(1.0f, -130), -0.0078125f};
  const std::vector<float> b{-1, 65536, 0.5f};
  const std::string file = path("bf16.safetensors");
  Tensor wt({2, 3}, DType::BFloat16), bt({3}, DType::BFloat16);
  const std::vector<uint16_t> w16 = bfloat16_of(w), b16 = bfloat16_of(b);
  std::memcpy(wt.raw_data(), w16.data(), 12);
  std::memcpy(bt.raw_data(), b16.data(), 6);
  write_safetensors(file, {{"w", wt}, {"b", bt}});
  const std::string header = read_file(file).substr(8, 120);
  EXPECT_NE(header.find(R"("dtype":"BF16")"), std::string::npos) << header;
  const auto tensors = read_safetensors(file);
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[0].second.dtype(), DType::BFloat16);
  EXPECT_EQ(raw_bytes(tensors[0].second), bytes_of(w16));
  const std::vector<SafetensorsEntry> entries = read_safetensors_header(file);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].name, "b");
  EXPECT_EQ(entries[1].dtype, DType::BFloat16);
  EXPECT_EQ(entries[1].shape, (Shape{3}));

  PairModule pair;
  const std::string refused = error_of([&] { load_safetensors(pair, file); });
  EXPECT_NE(refused.find("'w' has dtype BF16 in file, F32 in model"), std::string::npos) << refused;
  load_safetensors(pair, file, {.widen = true});
  EXPECT_EQ(raw_bytes(pair.w), bytes_of(w));
  EXPECT_EQ(raw_bytes(pair.b), bytes_of(b));

  class Pair64 : public Module {
   public:
    Pair64() {
      w = register_parameter("w", zeros({2, 3}, DType::Float64));
      b = register_parameter("b", zeros({3}, DType::Float64));
    }
    Tensor w, b;
  } pair64;
  load_safetensors(pair64, file, {.widen = true});
  EXPECT_EQ(pair64.w.to_vector<double>(), std::vector<double>(w.begin(), w.end()));
  save_safetensors(pair, path("f32.safetensors"));
  load_safetensors(pair64, path("f32.safetensors"), {.widen = true});  // F32 into float64
  EXPECT_EQ(pair64.b.to_vector<double>(), std::vector<double>(b.begin(), b.end()));
  save_safetensors(pair64, path("f64.safetensors"));
  const std::string narrowing = error_of([&] { load_safetensors(pair, path("f64.safetensors"), {.widen = true}); });
  EXPECT_NE(narrowing.find("'w' has dtype F64 in file, F32 in model"), std::string::npos) << narrowing;
}

// Several files load as one: all or nothing, a name in two files an error
// naming both, a parameter in none an error naming them all.
TEST_F(Safetensors, SeveralFilesLoadAsOne) {
  const Tensor w = from_vector(std::vector<float>{7, 8, 9, 10, 11, 12}, {2, 3});
  const Tensor b = from_vector(std::vector<float>{-1, -2, -3}, {3});
  write_safetensors(path("w.safetensors"), {{"w", w}});
  write_safetensors(path("b.safetensors"), {{"b", b}});
  write_safetensors(path("both.safetensors"), {{"b", b}, {"w", w}});
  PairModule pair;
  load_safetensors(pair, std::vector<std::string>{path("w.safetensors"), path("b.safetensors")});
  EXPECT_EQ(pair.w.to_vector<float>(), w.to_vector<float>());
  EXPECT_EQ(pair.b.to_vector<float>(), b.to_vector<float>());

  PairModule fresh;
  const std::string twice = error_of([&] {
    load_safetensors(fresh, std::vector<std::string>{path("w.safetensors"), path("both.safetensors")});
  });
  EXPECT_NE(twice.find("tensor 'w' of '" + path("w.safetensors") + "' and tensor 'w' of '" +
                       path("both.safetensors") + "' both go to parameter 'w'"), std::string::npos) << twice;
  write_safetensors(path("c.safetensors"), {{"c", b}});
  const std::string missing = error_of([&] {
    load_safetensors(fresh, std::vector<std::string>{path("w.safetensors"), path("c.safetensors")});
  });
  EXPECT_NE(missing.find("'b'"), std::string::npos) << missing;
  EXPECT_NE(missing.find("missing from the files"), std::string::npos) << missing;
  EXPECT_EQ(fresh.w.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));  // untouched
}

TEST_F(Safetensors, ShortOrMissingFile) {
  expect_load_fails(std::string("\x10\0\0", 3), {"file of 3 bytes is too short"});
  PairModule pair;
  const std::string message = error_of([&] { load_safetensors(pair, path("nowhere.safetensors")); });
  EXPECT_NE(message.find("nowhere.safetensors"), std::string::npos) << message;
  EXPECT_NE(message.find("cannot open"), std::string::npos) << message;
}

// Two runs writing one path shared "PATH.tmp": one truncated and renamed the
// other's half-written file. Each write now has a temporary name of its own.
TEST_F(Safetensors, AnotherWritersTemporaryFileIsLeftAlone) {
  const std::string file = path("shared.safetensors");
  write_file(file + ".tmp", "another writer's half-written file");
  const Tensor x = from_vector(std::vector<float>{1, 2}, {2});
  write_safetensors(file, {{"x", x}});
  write_safetensors(file, {{"x", x}});
  EXPECT_EQ(read_file(file + ".tmp"), "another writer's half-written file");
  EXPECT_EQ(read_safetensors(file).at(0).second.to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(files_in_dir(), (std::vector<std::string>{"shared.safetensors", "shared.safetensors.tmp"}));
}

TEST_F(Safetensors, WriterErrorsLeaveTheOldFile) {
  const std::string file = path("keep.safetensors");
  write_file(file, "old");
  const Tensor x = from_vector(std::vector<float>{1}, {1});
  EXPECT_NE(error_of([&] { write_safetensors(file, {{"x", x}, {"x", x}}); }).find("'x' appears twice"),
            std::string::npos);
  EXPECT_NE(error_of([&] { write_safetensors(file, {{"__metadata__", x}}); }).find("reserved"), std::string::npos);
  EXPECT_NE(error_of([&] { write_safetensors(file, {{"", x}}); }).find("empty name"), std::string::npos);
  EXPECT_NE(error_of([&] { write_safetensors(file, {{"u", Tensor()}}); }).find("'u' is undefined"), std::string::npos);
  EXPECT_EQ(read_file(file), "old");
  EXPECT_EQ(files_in_dir(), std::vector<std::string>{"keep.safetensors"});

  const std::string message = error_of([&] { write_safetensors(path("no/such/dir/x.safetensors"), {{"x", x}}); });
  EXPECT_NE(message.find("its folder '" + path("no/such/dir") + "'"), std::string::npos) << message;

  // A full disk part way through the body (engine/file_write.h's fault).
  ::setenv("REMAT_FAULT_WRITE", "ENOSPC:keep.safetensors:24", 1);
  const std::string full = error_of([&] { write_safetensors(file, {{"x", x}, {"y", x}}); });
  ::unsetenv("REMAT_FAULT_WRITE");
  EXPECT_NE(full.find("cannot write '" + file + "'"), std::string::npos) << full;
  EXPECT_NE(full.find("No space left on device (ENOSPC)"), std::string::npos) << full;
  EXPECT_EQ(read_file(file), "old");
  EXPECT_EQ(files_in_dir(), std::vector<std::string>{"keep.safetensors"});

  write_safetensors(file, {{"x", x}});  // a good write replaces the old file whole
  EXPECT_EQ(read_safetensors(file).at(0).second.to_vector<float>(), std::vector<float>{1});
}

// NumPy reads our file with only json and frombuffer. Optional: where
// /usr/bin/python3 or its numpy is absent, there is nothing to check.
TEST_F(Safetensors, NumpyReadsOurFile) {
  if (!fs::exists("/usr/bin/python3") || std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    return;
  }
  const std::string file = path("np.safetensors");
  write_safetensors(file,
                    {{"a", from_vector(std::vector<float>{1.5f, -2.25f, 3.0f, 0.1f}, {2, 2})},
                     {"b", from_vector(std::vector<int64_t>{-7, 8, 9000000000}, {3})},
                     {"c", from_vector(std::vector<double>{0.1}, {1})}},
                    {{"author", "remat"}});
  const std::string script = path("check.py");
  write_file(script, R"(import json, struct, sys
import numpy as np
data = open(sys.argv[1], 'rb').read()
(n,) = struct.unpack('<Q', data[:8])
assert (8 + n) % 8 == 0
header = json.loads(data[8:8 + n])
assert header.pop('__metadata__') == {'author': 'remat'}
body = data[8 + n:]
types = {'F32': '<f4', 'F64': '<f8', 'I64': '<i8'}
def get(name):
    e = header[name]
    b, end = e['data_offsets']
    return np.frombuffer(body[b:end], dtype=types[e['dtype']]).reshape(e['shape'])
assert list(header) == ['a', 'b', 'c']
assert (get('a') == np.array([[1.5, -2.25], [3.0, 0.1]], dtype=np.float32)).all()
assert get('b').tolist() == [-7, 8, 9000000000]
assert get('c').tolist() == [0.1]
)");
  EXPECT_EQ(std::system(("/usr/bin/python3 " + script + " " + file).c_str()), 0);
}

}  // namespace
}  // namespace remat::nn
