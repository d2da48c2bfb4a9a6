// A checkpoint folder's manifest (train/checkpoint_manifest.h): written, it
// verifies; any byte changed, a file truncated or missing, or the manifest
// itself damaged, and the check names the file; no manifest is told apart
// from a damaged one.
#include "train/checkpoint_manifest.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/support/errors.h"
#include "tests/support/files.h"

namespace remat::train {
namespace {

namespace fs = std::filesystem;
using testing::contains;

using testing::read_file;
using testing::write_file;

// A folder of two files and their manifest.
fs::path folder_with_manifest(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("remat_manifest_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file(dir / "weights.bin", std::string(5000, '\x7f') + "end");
  write_file(dir / "state.json", "{\"global_step\": 6}\n");
  write_manifest(dir.string());
  return dir;
}

TEST(CheckpointManifest, ListsEveryFileWithItsSizeAndCrc32) {
  write_file(fs::temp_directory_path() / "remat_manifest_crc.txt", "123456789");
  EXPECT_EQ(file_crc32((fs::temp_directory_path() / "remat_manifest_crc.txt").string()), 0xcbf43926u);  // CRC-32's check value
  const fs::path dir = folder_with_manifest("lists");
  const std::string manifest = read_file(dir / kManifestFile);
  EXPECT_TRUE(contains(manifest, "\"name\": \"state.json\",\n      \"size\": 19")) << manifest;
  EXPECT_TRUE(contains(manifest, "\"name\": \"weights.bin\",\n      \"size\": 5003")) << manifest;
  EXPECT_EQ(verify_manifest(dir.string()).status, ManifestStatus::Verified);
}

TEST(CheckpointManifest, AnyChangedByteTruncationOrMissingFileIsNamed) {
  for (const std::string file : {"weights.bin", "state.json"}) {
    const fs::path dir = folder_with_manifest("flip");
    std::string bytes = read_file(dir / file);
    bytes[bytes.size() / 2] ^= 0x20;
    write_file(dir / file, bytes);
    const ManifestCheck check = verify_manifest(dir.string());
    EXPECT_EQ(check.status, ManifestStatus::Damaged);
    EXPECT_EQ(check.file, (dir / file).string());
    EXPECT_TRUE(contains(check.problem, "'" + (dir / file).string() + "' has CRC-32")) << check.problem;
  }
  fs::path dir = folder_with_manifest("truncated");
  fs::resize_file(dir / "weights.bin", 4096);
  ManifestCheck check = verify_manifest(dir.string());
  EXPECT_TRUE(contains(check.problem, "weights.bin' is 4096 bytes, '" + (dir / kManifestFile).string() +
                                          "' says 5003")) << check.problem;
  fs::remove(dir / "state.json");
  check = verify_manifest(dir.string());
  EXPECT_TRUE(contains(check.problem, "state.json' is missing")) << check.problem;
}

TEST(CheckpointManifest, ADamagedOrAbsentManifestIsToldApart) {
  const fs::path dir = folder_with_manifest("damaged");
  std::string manifest = read_file(dir / kManifestFile);
  write_file(dir / kManifestFile, manifest.substr(0, manifest.size() / 2));
  ManifestCheck check = verify_manifest(dir.string());
  EXPECT_EQ(check.status, ManifestStatus::Damaged);
  EXPECT_EQ(check.file, (dir / kManifestFile).string());
  EXPECT_TRUE(contains(check.problem, "is unreadable")) << check.problem;
  write_file(dir / kManifestFile, R"({"files": [{"name": "../elsewhere", "size": 1, "crc32": "00000000"}]})");
  EXPECT_EQ(verify_manifest(dir.string()).status, ManifestStatus::Damaged);  // not remat's format, a path out
  fs::remove(dir / kManifestFile);
  EXPECT_EQ(verify_manifest(dir.string()).status, ManifestStatus::Missing);
}

// The manifest goes through write_file_atomically: a failed write leaves
// no manifest (so no folder that claims to verify), and names the file.
TEST(CheckpointManifest, AFailedWriteNamesTheManifest) {
  const fs::path dir = folder_with_manifest("fault");
  fs::remove(dir / kManifestFile);
  ::setenv("REMAT_FAULT_WRITE", "ENOSPC:manifest.json", 1);
  const std::string message = testing::error_of([&] { write_manifest(dir.string()); });
  ::unsetenv("REMAT_FAULT_WRITE");
  EXPECT_TRUE(contains(message, "manifest.json") && contains(message, "ENOSPC")) << message;
  EXPECT_FALSE(fs::exists(dir / kManifestFile));
}

}  // namespace
}  // namespace remat::train
