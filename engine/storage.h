// Storage: one allocation of bytes on a device, owned by every tensor (and
// view) that reads it. Accounting is by storage, so views cost nothing; the
// bytes return to the allocator when the last owner goes. A storage may
// also borrow bytes that another owner holds (a NumPy array's, shared by
// remat.from_numpy): counted by the allocator all the same while borrowed,
// and handed back to that owner at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/allocator.h"
#include "engine/device.h"
#include "engine/meta.h"

namespace remat {

class Storage {
 public:
  // Takes `nbytes` from the device's allocator under the current category;
  // on the meta device inside a MetaScope, whatever device was asked for.
  Storage(size_t nbytes, Device device, MemoryCategory category = current_category());
  // Borrows `nbytes` at `data` on the CPU; `owner` (whose last copy this
  // storage holds) keeps them alive, and its deleter lets them go.
  Storage(void* data, size_t nbytes, MemoryCategory category, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  MemoryCategory category() const { return category_; }
  // Moves this storage's bytes to another counter (e.g. to Parameter).
  void set_category(MemoryCategory category);
  // Bumped by every in-place write (optimizer steps, gradient clipping), so
  // that backward can tell a saved value was changed after it was saved.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }
  // next_sequence_nr() when it was allocated: how many autograd nodes had
  // been recorded, which places an input made during forward between two
  // of them (engine/record.h, Note [Inputs from outside the graph]).
  uint64_t made_before() const { return made_before_; }
  bool borrowed() const { return owner_ != nullptr; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  MemoryCategory category_;
  uint64_t version_ = 0;
  uint64_t made_before_ = 0;
  std::shared_ptr<void> owner_;  // borrowed bytes' owner (null: the allocator's own)
};

}  // namespace remat
