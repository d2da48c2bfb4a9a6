// Memory accounting: exact bytes per category, peaks, scopes, views free.
#include "engine/allocator.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/storage.h"
#include "ops/ops.h"

namespace remat {
namespace {

int64_t live(MemoryCategory c) { return cpu_allocator().stats().live_of(c); }

TEST(Allocator, CountsRequestedBytesPerCategory) {
  const int64_t before = live(MemoryCategory::Activation);
  {
    Tensor t({256, 1024}, DType::Float32);
    EXPECT_EQ(live(MemoryCategory::Activation) - before, 256 * 1024 * 4);
    Tensor u({3, 5}, DType::Float64);
    EXPECT_EQ(live(MemoryCategory::Activation) - before, 256 * 1024 * 4 + 3 * 5 * 8);
  }
  EXPECT_EQ(live(MemoryCategory::Activation), before);
}

TEST(Allocator, CategoryGuardChoosesTheCounter) {
  const int64_t before = live(MemoryCategory::OptimizerState);
  CategoryGuard guard(MemoryCategory::OptimizerState);
  Tensor t({10}, DType::Float32);
  EXPECT_EQ(live(MemoryCategory::OptimizerState) - before, 40);
}

TEST(Allocator, RecategorizeMovesBytes) {
  const int64_t act = live(MemoryCategory::Activation);
  const int64_t params = live(MemoryCategory::Parameter);
  Tensor t({100}, DType::Float32);
  t.storage()->set_category(MemoryCategory::Parameter);
  EXPECT_EQ(live(MemoryCategory::Activation), act);
  EXPECT_EQ(live(MemoryCategory::Parameter) - params, 400);
}

TEST(Allocator, BorrowedBytesAreCountedUntilHandedBackToTheirOwner) {
  std::vector<float> bytes(25, 1.0f);
  bool handed_back = false;
  const int64_t data = live(MemoryCategory::Data);
  {
    const auto storage = std::make_shared<Storage>(bytes.data(), 100, MemoryCategory::Data,
                                                   std::shared_ptr<void>(&handed_back, [](void* p) {
                                                     *static_cast<bool*>(p) = true;
                                                   }));
    EXPECT_TRUE(storage->borrowed());
    EXPECT_EQ(storage->data(), bytes.data());
    EXPECT_EQ(live(MemoryCategory::Data) - data, 100);
    storage->set_category(MemoryCategory::Parameter);
    EXPECT_EQ(live(MemoryCategory::Data), data);
  }
  EXPECT_TRUE(handed_back);
  EXPECT_EQ(live(MemoryCategory::Data), data);
  EXPECT_EQ(bytes[0], 1.0f);  // the owner's, untouched
}

TEST(Allocator, ViewsCostNothing) {
  Tensor t = zeros({64, 64});
  const MemoryStats before = cpu_allocator().stats();
  Tensor v = transpose(t, 0, 1);
  Tensor s = slice(v, 0, 3, 10);
  Tensor r = view(t, {4096});
  Tensor e = expand(view(t, {1, 64, 64}), {8, 64, 64});
  const MemoryStats after = cpu_allocator().stats();
  EXPECT_EQ(after.live_total, before.live_total);
  EXPECT_EQ(after.allocations, before.allocations);
}

TEST(Allocator, ScopedPeakMeasuresOnlyItsRegionAndNests) {
  Tensor big({1000}, DType::Float32);  // live before the scope: not part of the rise
  ScopedPeak outer;
  const int64_t base = outer.stats().live_transient;
  {
    Tensor a({250}, DType::Float32);  // +1000 bytes
    {
      ScopedPeak inner;
      Tensor b({500}, DType::Float32);  // +2000 bytes
      EXPECT_EQ(inner.stats().peak_transient - base, 3000);
    }
    Tensor c({100}, DType::Float32);  // +400 bytes, after b is gone
  }
  EXPECT_EQ(outer.stats().peak_transient - base, 3000);
  EXPECT_EQ(outer.stats().live_transient, base);
}

TEST(Allocator, TemporariesCountAsTransient) {
  ScopedPeak scope;
  const int64_t base = scope.stats().live_transient;
  {
    CategoryGuard guard(MemoryCategory::Temporary);
    Tensor t({10}, DType::Float64);
  }
  EXPECT_EQ(scope.stats().peak_transient - base, 80);
  EXPECT_EQ(scope.stats().peak_of(MemoryCategory::Temporary) - scope.stats().live_of(MemoryCategory::Temporary), 80);
}

TEST(Allocator, LargeBlocksAreCachedAndReused) {
  Allocator& a = cpu_allocator();
  a.empty_cache();
  void* first = nullptr;
  {
    Tensor t({256, 1024}, DType::Float32);  // 1 MiB
    first = t.raw_data();
  }
  EXPECT_EQ(a.stats().cached, 1024 * 1024);
  const int64_t live = a.stats().live_of(MemoryCategory::Activation);
  Tensor again({1024, 256}, DType::Float32);  // same size: the same block
  EXPECT_EQ(again.raw_data(), first);
  EXPECT_EQ(a.stats().cached, 0);
  EXPECT_EQ(a.stats().live_of(MemoryCategory::Activation) - live, 1024 * 1024);  // counted as requested
  // A request far smaller than a cached block does not take it.
  { Tensor other({256, 1024}, DType::Float32); }
  Tensor quarter({64, 1024}, DType::Float32);
  EXPECT_EQ(a.stats().cached, 1024 * 1024);
}

TEST(Allocator, OfEqualCachedBlocksTheLastFreedIsReusedFirst) {
  Allocator& a = cpu_allocator();
  a.empty_cache();
  void* older = nullptr;
  void* newer = nullptr;
  {
    Tensor t1({256, 1024}, DType::Float32);
    Tensor t2({256, 1024}, DType::Float32);
    older = t1.raw_data();
    newer = t2.raw_data();
    t1 = Tensor();  // freed first
  }                 // t2 freed last: still warm in cache
  Tensor again({256, 1024}, DType::Float32);
  EXPECT_EQ(again.raw_data(), newer);
  EXPECT_NE(again.raw_data(), older);
}

TEST(Allocator, OnlyFreshBlocksCountFirstTouchTime) {
  Allocator& a = cpu_allocator();
  a.empty_cache();
  const double before = first_touch_ms();
  { Tensor fresh({1024, 1024}, DType::Float32); }  // 4 MiB of new pages, mapped as allocated
  const double after_fresh = first_touch_ms();
  EXPECT_GT(after_fresh, before);
  { Tensor reused({1024, 1024}, DType::Float32); }  // the cached block: no pages to map
  EXPECT_EQ(first_touch_ms(), after_fresh);
}

TEST(Allocator, ABlockUpToAnEighthLargerIsReusedAndCountedAsItsOwnSize) {
  Allocator& a = cpu_allocator();
  a.empty_cache();
  void* block = nullptr;
  { Tensor t({1 << 18}, DType::Float32); block = t.raw_data(); }  // 1 MiB cached
  {
    Tensor t({15 << 14}, DType::Float32);  // 960 KiB: the 1 MiB block is at most 1/8 larger
    EXPECT_EQ(t.raw_data(), block);
    EXPECT_EQ(a.stats().cached, 0);
  }
  EXPECT_EQ(a.stats().cached, 1 << 20);  // back as its own size
  {
    Tensor t({1 << 17}, DType::Float32);  // 512 KiB: the 1 MiB block is too large for it
    EXPECT_NE(t.raw_data(), block);
  }
  a.empty_cache();
}

TEST(Allocator, ASecondFreeOfABlockIsAnError) {
  Allocator& a = cpu_allocator();
  void* p = a.allocate(1 << 20, MemoryCategory::Temporary);
  a.deallocate(p, 1 << 20, MemoryCategory::Temporary);
  EXPECT_THROW(a.deallocate(p, 1 << 20, MemoryCategory::Temporary), Error);
  a.empty_cache();
}

TEST(Allocator, SmallBlocksAreNotCachedAndEmptyCacheReturnsAll) {
  Allocator& a = cpu_allocator();
  a.empty_cache();
  { Tensor small({100}, DType::Float32); }
  EXPECT_EQ(a.stats().cached, 0);
  { Tensor big({1 << 20}, DType::Float32); }
  EXPECT_EQ(a.stats().cached, 4 << 20);
  a.empty_cache();
  EXPECT_EQ(a.stats().cached, 0);
}

}  // namespace
}  // namespace remat
