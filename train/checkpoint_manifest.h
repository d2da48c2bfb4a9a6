// A checkpoint folder's manifest: manifest.json lists every file of the
// folder with its size and CRC-32 (zlib's), written last, so that a resume
// can tell a whole checkpoint from one that a flipped bit, a truncation or
// a hand edit has changed. Not the checkpoint's format (train/checkpoint.h)
// nor the choice of which checkpoint to resume (the Trainer's,
// train/trainer_checkpoints.cpp). Tested in tests/train/checkpoint_manifest_test.cpp.
//
//   write_manifest("out/.checkpoint-8.tmp");  // its files written: now the manifest, then the rename
//   const ManifestCheck check = verify_manifest("out/checkpoint-8");
//   if (check.status == ManifestStatus::Damaged) ...  // check.problem names the file and what differs
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace remat::train {

constexpr const char* kManifestFile = "manifest.json";

// Writes folder/manifest.json (whole or not at all, engine/file_write.h):
// the name, size and CRC-32 of every regular file in `folder` but the
// manifest itself, read back from the disk. Errors name the file.
void write_manifest(const std::string& folder);

enum class ManifestStatus {
  Verified,  // every file listed is there, with its size and checksum
  Missing,   // the folder has no manifest.json (written before manifests, or not a checkpoint)
  Damaged,   // the manifest is unreadable, or a file it lists is missing or differs
};

struct ManifestCheck {
  ManifestStatus status = ManifestStatus::Missing;
  std::string problem;  // Damaged: what differs, naming the file ("'out/checkpoint-8/trainer_state.json' has ...")
  std::string file;     // Damaged: the path of the file that fails
  std::vector<std::string> files;  // Verified: the names the manifest lists
};

// Checks every file `folder`'s manifest lists: present, of its size, of its
// CRC-32. Files the manifest does not list are not read.
ManifestCheck verify_manifest(const std::string& folder);

// The CRC-32 of a file's bytes (zlib's crc32_z). Errors name the file.
uint32_t file_crc32(const std::string& path);

}  // namespace remat::train
