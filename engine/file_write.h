// Files written whole or not at all: every file remat writes (weights,
// checkpoints, profiles, traces, tables, DOT) goes through here, so a full
// disk, a missing permission or a kill mid-write leaves the old file as it
// was, never a truncated one. Not a general I/O layer: reading is each
// format's own. Tested in tests/engine/file_write_test.cpp.
//
//   write_file_atomically("plan.json", text);        // small files, in one call
//
//   AtomicFile file("model.safetensors");            // large ones, piece by piece
//   file.write(header.data(), header.size());
//   file.write(body, n);
//   file.commit();                                   // now the name holds it
//
// Note [Whole or not at all]: the bytes go to a temporary file in the same
// folder, created with O_EXCL under a name of this write alone (path.tmp.PID.N),
// are flushed to disk (fsync), and the temporary is renamed onto `path`
// (atomic within a file system); then the folder itself is flushed, so the
// new name survives a power cut. Two writers of one path each write their
// own temporary, so the name ends up holding one of the files whole. On any
// failure the temporary is removed, `path` is untouched, and the error names
// `path` and the reason (ENOSPC, EACCES, ...).
//
// Faults on purpose, for tests of the callers: REMAT_FAULT_WRITE=ENAME[:TEXT[:BYTES]]
// makes the writes of every path containing TEXT (all, when empty) fail
// with errno ENAME once BYTES bytes of the file are written (0 when left out).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace remat {

class AtomicFile {
 public:
  // Creates the temporary next to `path`. Errors: the folder is missing or
  // not writable (named, with the reason).
  explicit AtomicFile(std::string path);
  // Without commit(): the temporary is removed and `path` stays as it was.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends bytes. Errors name `path` and the reason (ENOSPC: the disk is full).
  void write(const void* data, size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Flushes the bytes to disk and renames the temporary onto `path`, then
  // flushes the folder. Errors as write(); after one, `path` is unchanged.
  void commit();

  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(std::string_view doing, int error);

  std::string path_, tmp_;
  int fd_ = -1;
  int64_t written_ = 0;
  bool committed_ = false;
  // REMAT_FAULT_WRITE's fault for this path, read once: its errno (0: none)
  // and the bytes written before it strikes.
  int fault_errno_ = 0;
  int64_t fault_after_bytes_ = 0;
};

// `bytes` into `path`, whole or not at all (Note [Whole or not at all]).
void write_file_atomically(const std::string& path, std::string_view bytes);

// Flushes a folder's entries to disk (a rename into it survives a power
// cut); a folder that cannot be opened or flushed (some network file
// systems) is left as it is.
void sync_folder(const std::string& folder);

// "No space left on device (ENOSPC)": the reason of an errno, as errors say it.
std::string errno_text(int error);

}  // namespace remat
