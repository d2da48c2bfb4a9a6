// CachingPool and HostBackingStore; the policy is listed in caching_pool.h.
#include "engine/caching_pool.h"

#include <cstdlib>

#include <fmt/format.h>

#include "engine/error.h"

namespace remat {
namespace {

constexpr size_t kSmallStep = 512;
constexpr size_t kSmallMax = size_t{1} << 20;
constexpr size_t kLargeStep = size_t{2} << 20;
constexpr size_t kHostAlignment = 256;  // as cudaMalloc's

size_t round_up(size_t bytes, size_t step) { return (bytes + step - 1) / step * step; }

}  // namespace

void* HostBackingStore::reserve(size_t bytes) {
  if (bytes > capacity_ - reserved_) return nullptr;
  void* ptr = std::aligned_alloc(kHostAlignment, round_up(bytes, kHostAlignment));
  if (ptr) reserved_ += bytes;
  return ptr;
}

void HostBackingStore::release(void* ptr, size_t bytes) {
  std::free(ptr);
  reserved_ -= bytes;
}

size_t CachingPool::size_class(size_t bytes) {
  return bytes <= kSmallMax ? round_up(bytes, kSmallStep) : round_up(bytes, kLargeStep);
}

CachingPool::CachingPool(std::unique_ptr<BackingStore> store) : store_(std::move(store)) {}

CachingPool::~CachingPool() {
  for (const auto& [ptr, block] : blocks_) store_->release(ptr, block.size);
}

void* CachingPool::allocate(size_t bytes, uint64_t stream) {
  if (bytes == 0) return nullptr;
  const size_t size = size_class(bytes);
  std::lock_guard lock(mutex_);
  if (auto it = free_.find({stream, size}); it != free_.end() && !it->second.empty()) {
    void* ptr = it->second.back();  // the one freed last: the likeliest still in cache
    it->second.pop_back();
    blocks_[ptr].in_use = true;
    stats_.cached_bytes -= static_cast<int64_t>(size);
    return ptr;
  }
  void* ptr = store_->reserve(size);
  if (!ptr && stats_.cached_bytes > 0) {
    release_cached();
    ptr = store_->reserve(size);
  }
  REMAT_CHECK(ptr != nullptr, "allocate: out of memory on {} asking for {} bytes (block of {}); {} bytes are in use "
              "in {} blocks, none cached", store_->name(), bytes, size, stats_.reserved_bytes, stats_.blocks);
  blocks_[ptr] = {.size = size, .stream = stream, .in_use = true};
  stats_.reserved_bytes += static_cast<int64_t>(size);
  stats_.blocks += 1;
  stats_.reserves += 1;
  return ptr;
}

void CachingPool::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  const auto it = blocks_.find(ptr);
  REMAT_CHECK(it != blocks_.end() && it->second.in_use, "deallocate: block {} on {} was not allocated by this pool or "
              "is already free", fmt::ptr(ptr), store_->name());
  it->second.in_use = false;
  free_[{it->second.stream, it->second.size}].push_back(ptr);
  stats_.cached_bytes += static_cast<int64_t>(it->second.size);
}

void CachingPool::empty_cache() {
  std::lock_guard lock(mutex_);
  release_cached();
}

void CachingPool::release_cached() {
  for (auto& [key, ptrs] : free_) {
    for (void* ptr : ptrs) {
      store_->release(ptr, key.second);
      blocks_.erase(ptr);
      stats_.reserved_bytes -= static_cast<int64_t>(key.second);
      stats_.blocks -= 1;
      stats_.releases += 1;
    }
  }
  free_.clear();
  stats_.cached_bytes = 0;
}

PoolStats CachingPool::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace remat
