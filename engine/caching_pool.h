// CachingPool: a device's memory in blocks by size class, reused in stream
// order and kept until empty_cache(), below the Allocator's accounting
// (engine/allocator.h). The CUDA allocator is one over cudaMalloc; the pool
// logic is tested on the CPU over HostBackingStore, a real allocator.
//
//   CachingPool pool(std::make_unique<HostBackingStore>());
//   void* p = pool.allocate(1000, /*stream=*/0);   // a 1024-byte block of class 1024
//   pool.deallocate(p);                            // cached, not released
//   pool.allocate(900, 0) == p;                    // the same block, no new reserve
//
// Policy:
//  - a request is rounded up to its size class: 512-byte steps up to 1 MiB,
//    2 MiB steps above; a block serves requests of its class only, so a
//    step of the same shapes reuses the same blocks every time;
//  - a freed block goes to the free list of (the stream it was allocated
//    on, its class) and the next request of that class on that stream takes
//    it without synchronising: work queued on one stream runs in order, so
//    the next kernel that writes the block runs after the last that read
//    it. A block is never handed to another stream;
//  - a class with no free block takes a new block from the backing store;
//    if the store refuses (out of memory), the pool gives back every cached
//    block and tries once more: inside a step that is the only time memory
//    goes back to the driver;
//  - freeing a block twice, or one the pool did not hand out, is an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace remat {

// Where a pool's blocks come from: cudaMalloc on a GPU, the heap in tests.
class BackingStore {
 public:
  virtual ~BackingStore() = default;
  // `bytes` of fresh memory, or null when the store has no more.
  virtual void* reserve(size_t bytes) = 0;
  virtual void release(void* ptr, size_t bytes) = 0;
  virtual std::string name() const = 0;  // in error messages: "cuda:0", "host"
};

// The heap, 256-byte aligned, with an optional capacity past which reserve()
// returns null (an out-of-memory device, for tests of that path).
class HostBackingStore final : public BackingStore {
 public:
  explicit HostBackingStore(size_t capacity = SIZE_MAX) : capacity_(capacity) {}
  void* reserve(size_t bytes) override;
  void release(void* ptr, size_t bytes) override;
  std::string name() const override { return "host"; }

 private:
  size_t capacity_;
  size_t reserved_ = 0;
};

struct PoolStats {
  int64_t reserved_bytes = 0;  // held from the store: in use and cached
  int64_t cached_bytes = 0;    // of free blocks, waiting for reuse
  int64_t blocks = 0;          // held from the store
  int64_t reserves = 0;        // calls to the store since construction, and releases
  int64_t releases = 0;
};

class CachingPool {
 public:
  explicit CachingPool(std::unique_ptr<BackingStore> store);
  ~CachingPool();  // gives every block back; the caller has freed them
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;

  // A block of at least `bytes` for work on `stream` (null for 0 bytes).
  // Error when the store is out of memory even with the cache given back,
  // naming the request, the store and the bytes in use.
  void* allocate(size_t bytes, uint64_t stream);
  void deallocate(void* ptr);
  // Gives every cached block back to the store.
  void empty_cache();
  PoolStats stats() const;
  static size_t size_class(size_t bytes);

 private:
  struct Block {
    size_t size = 0;
    uint64_t stream = 0;
    bool in_use = false;
  };
  void release_cached();  // caller holds mutex_

  std::unique_ptr<BackingStore> store_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> blocks_;                          // every block held from the store
  std::map<std::pair<uint64_t, size_t>, std::vector<void*>> free_;  // (stream, class) -> free blocks
  PoolStats stats_;
};

}  // namespace remat
