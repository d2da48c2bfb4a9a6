// Allocator: every byte a tensor holds comes from here, and is counted.
//
// Policy, in short:
//  - bytes are counted as requested (exact: a (256, 1024) float32 tensor is
//    1 MiB, whatever the alignment padding), per device and per category;
//  - live and peak are kept per category, for all categories together, and
//    for the transient ones (activation + temporary), which is the figure the
//    workloads report as peak activation bytes;
//  - a category can be changed after allocation (a tensor that becomes a
//    parameter or a leaf gradient), moving its bytes between counters;
//  - the meta device's allocator counts the same way and backs nothing
//    (its data pointers are null; engine/device.h);
//  - a GPU's allocator counts the same way over a CachingPool
//    (engine/caching_pool.h: blocks by size class, reused in stream order,
//    kept until empty_cache()), whose cached bytes are MemoryStats::cached;
//  - CPU memory is 64-byte aligned (bytes a Storage borrows, a NumPy
//    array's, are aligned to their dtype only). Blocks of 64 KiB and more are cached:
//    a freed block waits in a free list for the next request of its size
//    (rounded up to 4 KiB, taking a block at most 1/8 larger), because a
//    fresh block costs a page fault per 4 KiB on first touch (on W1 that was
//    68 MiB of faults per step); cached bytes are counted apart from the
//    categories (MemoryStats::cached) and are capped (kMaxCachedBytes; a
//    block that does not fit goes back to the system), and empty_cache()
//    returns them all. Smaller blocks go straight to malloc and free;
//  - a fresh cacheable block has its pages mapped as it is allocated, and
//    the time that takes is counted per thread (first_touch_ms), so that a
//    measured op time can leave out a cost that steady-state steps never pay.
// The current category for new storage is set by CategoryGuard (thread-local;
// Activation by default). ScopedPeak measures the peaks of one region.
// Before it takes activation or temporary bytes, an allocator asks the
// memory-pressure handler of the calling thread, if one is installed, to make
// room (Note [Eviction] in engine/eviction.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/device.h"

namespace remat {

// Data is what datasets hold before a batch is drawn from them (not part of
// any step); a drawn batch is an Activation, as the input of forward.
enum class MemoryCategory { Parameter, Gradient, OptimizerState, Activation, Temporary, Data };
inline constexpr size_t kMemoryCategories = 6;

std::string_view category_name(MemoryCategory category);
// Activation and temporary bytes: what peak activation figures count.
inline bool is_transient(MemoryCategory c) { return c == MemoryCategory::Activation || c == MemoryCategory::Temporary; }

struct MemoryStats {
  std::array<int64_t, kMemoryCategories> live{};
  std::array<int64_t, kMemoryCategories> peak{};
  int64_t live_total = 0;
  int64_t peak_total = 0;
  int64_t live_transient = 0;  // activation + temporary
  int64_t peak_transient = 0;
  int64_t allocations = 0;  // count since the start of the process
  int64_t cached = 0;       // bytes of freed blocks kept for reuse (no category)

  int64_t live_of(MemoryCategory c) const { return live[static_cast<size_t>(c)]; }
  int64_t peak_of(MemoryCategory c) const { return peak[static_cast<size_t>(c)]; }
};

class CachingPool;
class Allocator;

// Asked by Allocator::allocate, on the thread that installed it, before
// `nbytes` of activation or temporary bytes are taken from `allocator`:
// it may free bytes (evict) to keep a budget; it must not allocate from
// `allocator` itself. engine/eviction.h's ResidentPool is one.
class MemoryPressureHandler {
 public:
  virtual ~MemoryPressureHandler() = default;
  virtual void make_room(Allocator& allocator, size_t nbytes) = 0;
};
// Installs `handler` (null: none) for this thread; returns the one before.
MemoryPressureHandler* set_memory_pressure_handler(MemoryPressureHandler* handler);
MemoryPressureHandler* memory_pressure_handler();

class Allocator {
 public:
  // The CPU's and the meta device's allocators take no pool; a device's
  // (CUDA) takes its blocks from `pool` (engine/caching_pool.h), which the
  // tests give a host backing store.
  explicit Allocator(Device device, std::unique_ptr<CachingPool> pool = nullptr);
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  void* allocate(size_t nbytes, MemoryCategory category);
  void deallocate(void* ptr, size_t nbytes, MemoryCategory category);
  void recategorize(size_t nbytes, MemoryCategory from, MemoryCategory to);
  // Counts bytes that another owner holds and a Storage borrows, as if
  // allocated here (negative: let go of).
  void count_borrowed(int64_t nbytes, MemoryCategory category);

  MemoryStats stats() const;
  // Sets every peak to the current live figure.
  void reset_peaks();
  // Raises every peak to at least `floor` (used to restore outer measurements).
  void merge_peaks(const MemoryStats& floor);
  // Returns every cached block to the system.
  void empty_cache();
  Device device() const { return device_; }

  // For TransientPeakWatch: `peak` follows live transient bytes until
  // unwatched; returns the level it starts from.
  int64_t watch(int64_t* peak);
  void unwatch(int64_t* peak);
  int64_t watched(const int64_t* peak) const;

 private:
  void add(int64_t nbytes, MemoryCategory category);  // caller holds mutex_
  void release_cache();                               // caller holds mutex_

  struct Block {
    size_t size = 0;
    bool in_use = false;  // a second free of a block is an error, not two owners of it
  };

  Device device_;
  std::unique_ptr<CachingPool> pool_;
  mutable std::mutex mutex_;
  MemoryStats stats_;
  std::multimap<size_t, void*> free_blocks_;  // block size -> block, cached
  std::unordered_map<void*, Block> blocks_;   // every cacheable block, in use or cached
  std::vector<int64_t*> watches_;
};

// The allocator of a device (one per device, living for the whole process).
Allocator& allocator_for(Device device);
inline Allocator& cpu_allocator() { return allocator_for(Device::cpu()); }

MemoryCategory current_category();

// Milliseconds this thread has spent mapping the pages of fresh blocks, since
// it started; the difference across a region is that region's share.
double first_touch_ms();

class CategoryGuard {
 public:
  explicit CategoryGuard(MemoryCategory category);
  ~CategoryGuard();
  CategoryGuard(const CategoryGuard&) = delete;
  CategoryGuard& operator=(const CategoryGuard&) = delete;

 private:
  MemoryCategory previous_;
};

// Measures the peaks reached between construction and stats(): peaks are
// reset on entry and, on exit, the enclosing region's peaks are restored
// (raised by what happened inside), so scopes nest.
class ScopedPeak {
 public:
  explicit ScopedPeak(Device device = Device::cpu());
  explicit ScopedPeak(Allocator& allocator);
  ~ScopedPeak();
  ScopedPeak(const ScopedPeak&) = delete;
  ScopedPeak& operator=(const ScopedPeak&) = delete;

  // Live and peak figures as of now, peaks counted from construction.
  MemoryStats stats() const { return allocator_.stats(); }

 private:
  Allocator& allocator_;
  MemoryStats outer_;
};

// Follows the highest live activation + temporary bytes from construction
// on. Unlike ScopedPeak it resets nothing, so watches need not nest: a
// planner can measure a step that spans several of the caller's scopes.
class TransientPeakWatch {
 public:
  explicit TransientPeakWatch(Device device = Device::cpu());
  explicit TransientPeakWatch(Allocator& allocator);
  ~TransientPeakWatch();
  TransientPeakWatch(const TransientPeakWatch&) = delete;
  TransientPeakWatch& operator=(const TransientPeakWatch&) = delete;

  // The highest level since construction, less the level then.
  int64_t rise() const;

 private:
  Allocator& allocator_;
  int64_t peak_ = 0;   // written by the allocator from construction on
  int64_t start_ = 0;  // initialised after peak_, by watch(&peak_)
};

}  // namespace remat
