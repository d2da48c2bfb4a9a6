// The files of a training run, safe from a careless user: a lock that keeps a
// second run off a checkpoint (or a weights folder) while the first one holds
// it, and the checks made before the first step that every output can be
// written, that its disk has room for it, and that no two flags name one file
// (weights written over the training text). Called by the Trainer (its
// output_dir's lock) and the kjv-gpt task; tested in
// tests/train/run_files_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat::train {

// An exclusive lock (flock) on `lock_file` (path + ".lock" when empty, a
// trailing '/' of `path` dropped), held as long as this object lives. The
// lock file holds the holder's pid, so that a second run given the same path
// fails at its start with "output_dir 'results' is in use by another run
// (process 1234, ...)" instead of writing the same files. The file is removed
// on release; if the holder dies, the kernel drops its lock and the next run
// takes it.
class RunLock {
 public:
  // `flag` and `path` are what the user gave, for the messages. Errors:
  // another process (or another RunLock of this one) holds the lock, or the
  // lock file cannot be created.
  RunLock(const std::string& path, std::string_view flag, std::string lock_file = "");
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  const std::string& lock_path() const { return lock_path_; }

 private:
  std::string lock_path_;
  int fd_ = -1;
};

// Errors unless a file can be written at `path` (empty: nothing to check):
// it names a folder, its folder is missing or not a folder, or no file can
// be created there (tried, so that read-only file systems count too). Each
// message names `flag` and the path.
void check_output_path(const std::string& path, std::string_view flag);

// Errors unless the file system of `path` (a folder, or a file to be
// written: the nearest folder that exists) has `bytes` free for an
// unprivileged writer (statvfs's f_bavail), so that a run whose output cannot
// fit stops before training rather than after. The message names `flag`,
// the folder and both numbers. A file system that cannot say is not refused.
void check_free_space(const std::string& path, int64_t bytes, std::string_view flag);

// Errors when two of the (flag, path) pairs name one file: the same path once
// made absolute and normalised, or, for files that exist, one file under two
// names (std::filesystem::equivalent: symbolic and hard links). Empty paths
// are skipped.
void check_distinct_paths(const std::vector<std::pair<std::string, std::string>>& flag_paths);

}  // namespace remat::train
