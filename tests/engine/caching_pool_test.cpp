// The caching pool under the GPU's allocator, run on the CPU over a host
// backing store: size classes, reuse in stream order, nothing given back
// until empty_cache() or out of memory, errors that name the request; and an
// Allocator over it keeps the CPU's accounting (categories, peaks, scopes).
#include "engine/caching_pool.h"

#include <gtest/gtest.h>

#include "engine/allocator.h"
#include "tests/support/errors.h"

namespace remat {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(CachingPool, RoundsRequestsToSizeClasses) {
  EXPECT_EQ(CachingPool::size_class(1), 512u);
  EXPECT_EQ(CachingPool::size_class(512), 512u);
  EXPECT_EQ(CachingPool::size_class(513), 1024u);
  EXPECT_EQ(CachingPool::size_class(kMiB), kMiB);
  EXPECT_EQ(CachingPool::size_class(kMiB + 1), 2 * kMiB);
  EXPECT_EQ(CachingPool::size_class(5 * kMiB), 6 * kMiB);
}

TEST(CachingPool, ReusesAFreedBlockOfTheClassOnTheSameStream) {
  CachingPool pool(std::make_unique<HostBackingStore>());
  void* p = pool.allocate(1000, 0);
  ASSERT_NE(p, nullptr);
  pool.deallocate(p);
  EXPECT_EQ(pool.stats().cached_bytes, 1024);
  EXPECT_EQ(pool.allocate(900, 0), p);  // the same class: the same block, no new reserve
  EXPECT_EQ(pool.stats().reserves, 1);
  EXPECT_EQ(pool.stats().cached_bytes, 0);
  void* other_class = pool.allocate(2000, 0);
  EXPECT_NE(other_class, p);
  EXPECT_EQ(pool.stats().reserves, 2);
  pool.deallocate(p);
  pool.deallocate(other_class);
  EXPECT_EQ(pool.allocate(0, 0), nullptr);
}

TEST(CachingPool, NeverHandsABlockToAnotherStream) {
  CachingPool pool(std::make_unique<HostBackingStore>());
  void* p = pool.allocate(4096, 1);
  pool.deallocate(p);
  void* q = pool.allocate(4096, 2);  // another stream may still be reading p's last user
  EXPECT_NE(q, p);
  EXPECT_EQ(pool.allocate(4096, 1), p);
  pool.deallocate(p);
  pool.deallocate(q);
}

TEST(CachingPool, GivesNothingBackUntilEmptyCache) {
  CachingPool pool(std::make_unique<HostBackingStore>());
  std::vector<void*> blocks;
  for (int i = 1; i <= 10; ++i) blocks.push_back(pool.allocate(static_cast<size_t>(i) * 3 * kMiB, 0));
  for (void* p : blocks) pool.deallocate(p);
  const PoolStats kept = pool.stats();
  EXPECT_EQ(kept.releases, 0);
  EXPECT_EQ(kept.blocks, 10);
  EXPECT_EQ(kept.cached_bytes, kept.reserved_bytes);
  // The same requests again, as the next step makes them: no new reserve.
  for (int i = 1; i <= 10; ++i) blocks[static_cast<size_t>(i - 1)] = pool.allocate(static_cast<size_t>(i) * 3 * kMiB, 0);
  EXPECT_EQ(pool.stats().reserves, 10);
  for (void* p : blocks) pool.deallocate(p);
  pool.empty_cache();
  EXPECT_EQ(pool.stats().releases, 10);
  EXPECT_EQ(pool.stats().reserved_bytes, 0);
  EXPECT_EQ(pool.stats().blocks, 0);
}

TEST(CachingPool, OutOfMemoryGivesTheCacheBackAndTriesOnceMore) {
  CachingPool pool(std::make_unique<HostBackingStore>(4 * kMiB));
  void* big = pool.allocate(3 * kMiB, 0);  // class 4 MiB: the whole store
  pool.deallocate(big);
  void* small = pool.allocate(kMiB, 0);  // the store is full: the cached block goes back first
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(pool.stats().releases, 1);
  EXPECT_EQ(pool.stats().reserved_bytes, static_cast<int64_t>(kMiB));
  const std::string message = testing::error_of([&] { (void)pool.allocate(4 * kMiB, 0); });
  EXPECT_TRUE(testing::contains(message, "out of memory on host")) << message;
  EXPECT_TRUE(testing::contains(message, "4194304 bytes")) << message;
  EXPECT_TRUE(testing::contains(message, "1048576 bytes are in use")) << message;
  pool.deallocate(small);
}

TEST(CachingPool, FreeingTwiceOrAForeignBlockIsAnError) {
  CachingPool pool(std::make_unique<HostBackingStore>());
  void* p = pool.allocate(64, 0);
  pool.deallocate(p);
  EXPECT_TRUE(testing::contains(testing::error_of([&] { pool.deallocate(p); }), "already free"));
  int local = 0;
  EXPECT_TRUE(testing::contains(testing::error_of([&] { pool.deallocate(&local); }), "not allocated by this pool"));
}

// The accounting a GPU's allocator keeps is the CPU's: requested bytes per
// category (not the rounded blocks), peaks, scopes and watches; the pool's
// cached bytes apart.
TEST(CachingPool, AnAllocatorOverItKeepsTheCpusAccounting) {
  Allocator allocator(Device::cuda(0), std::make_unique<CachingPool>(std::make_unique<HostBackingStore>()));
  EXPECT_EQ(allocator.device(), Device::cuda(0));
  void* params = allocator.allocate(1000, MemoryCategory::Parameter);
  TransientPeakWatch watch(allocator);
  void* a = nullptr;
  {
    ScopedPeak scope(allocator);
    a = allocator.allocate(3000, MemoryCategory::Activation);
    void* t = allocator.allocate(500, MemoryCategory::Temporary);
    allocator.deallocate(t, 500, MemoryCategory::Temporary);
    EXPECT_EQ(scope.stats().peak_transient, 3500);
  }
  const MemoryStats stats = allocator.stats();
  EXPECT_EQ(stats.live_of(MemoryCategory::Parameter), 1000);
  EXPECT_EQ(stats.live_of(MemoryCategory::Activation), 3000);
  EXPECT_EQ(stats.live_transient, 3000);
  EXPECT_EQ(stats.peak_transient, 3500);
  EXPECT_EQ(stats.live_total, 4000);
  EXPECT_EQ(stats.cached, 512);  // the temporary's block, kept for reuse
  EXPECT_EQ(watch.rise(), 3500);
  allocator.recategorize(3000, MemoryCategory::Activation, MemoryCategory::Gradient);
  EXPECT_EQ(allocator.stats().live_of(MemoryCategory::Gradient), 3000);
  allocator.deallocate(a, 3000, MemoryCategory::Gradient);
  allocator.deallocate(params, 1000, MemoryCategory::Parameter);
  EXPECT_EQ(allocator.stats().live_total, 0);
  allocator.empty_cache();
  EXPECT_EQ(allocator.stats().cached, 0);
}

}  // namespace
}  // namespace remat
