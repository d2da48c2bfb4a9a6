// Allocator and memory accounting; the policy is listed in allocator.h.
#include "engine/allocator.h"

#include <algorithm>
#include <chrono>
#include <vector>
#include <cstdlib>
#include <memory>

#include "engine/caching_pool.h"
#include "engine/error.h"

#if REMAT_HAVE_CUDA
#include "kernels/cuda/runtime.h"
#endif

namespace remat {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kCacheMinBytes = 64 * 1024;
constexpr size_t kCachePage = 4096;
constexpr size_t kMaxCachedBytes = size_t{2} << 30;

thread_local MemoryCategory t_category = MemoryCategory::Activation;
thread_local double t_first_touch_ms = 0;
thread_local MemoryPressureHandler* t_pressure = nullptr;

// Maps a fresh block's pages now, one write per page, and counts the time:
// the page faults a block costs once, on first use, which the cache spares
// every later step. Measured node times leave it out (first_touch_ms).
void touch_pages(void* ptr, size_t nbytes) {
  const auto start = std::chrono::steady_clock::now();
  auto* bytes = static_cast<volatile char*>(ptr);
  for (size_t at = 0; at < nbytes; at += kCachePage) bytes[at] = 0;
  t_first_touch_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double first_touch_ms() { return t_first_touch_ms; }

MemoryPressureHandler* set_memory_pressure_handler(MemoryPressureHandler* handler) {
  MemoryPressureHandler* previous = t_pressure;
  t_pressure = handler;
  return previous;
}
MemoryPressureHandler* memory_pressure_handler() { return t_pressure; }

std::string_view category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::Parameter: return "parameter";
    case MemoryCategory::Gradient: return "gradient";
    case MemoryCategory::OptimizerState: return "optimizer_state";
    case MemoryCategory::Activation: return "activation";
    case MemoryCategory::Temporary: return "temporary";
    case MemoryCategory::Data: return "data";
  }
  return "?";
}

void Allocator::add(int64_t nbytes, MemoryCategory category) {
  const auto i = static_cast<size_t>(category);
  stats_.live[i] += nbytes;
  stats_.peak[i] = std::max(stats_.peak[i], stats_.live[i]);
  stats_.live_total += nbytes;
  stats_.peak_total = std::max(stats_.peak_total, stats_.live_total);
  if (is_transient(category)) {
    stats_.live_transient += nbytes;
    stats_.peak_transient = std::max(stats_.peak_transient, stats_.live_transient);
    for (int64_t* peak : watches_) *peak = std::max(*peak, stats_.live_transient);
  }
}

Allocator::Allocator(Device device, std::unique_ptr<CachingPool> pool) : device_(device), pool_(std::move(pool)) {}

Allocator::~Allocator() = default;

void* Allocator::allocate(size_t nbytes, MemoryCategory category) {
  // Outside the lock: making room frees storages, which deallocate here.
  if (t_pressure && is_transient(category) && nbytes > 0) t_pressure->make_room(*this, nbytes);
  if (device_.is_meta() || pool_) {  // counted; backed by nothing (meta) or by the pool
    void* ptr = pool_ ? pool_->allocate(nbytes, 0) : nullptr;  // one stream per device so far
    std::lock_guard lock(mutex_);
    add(static_cast<int64_t>(nbytes), category);
    ++stats_.allocations;
    return ptr;
  }
  REMAT_CHECK(device_.is_cpu(), "allocate: no allocator for device {} in this build", device_.str());
  if (nbytes == 0) return nullptr;
  void* ptr = nullptr;
  size_t fresh_bytes = 0;  // a new cacheable block, whose pages are not yet mapped
  {
    std::lock_guard lock(mutex_);
    if (nbytes >= kCacheMinBytes) {
      const size_t size = (nbytes + kCachePage - 1) / kCachePage * kCachePage;
      auto it = free_blocks_.lower_bound(size);
      // Of the blocks of the best size, the one freed last: the likeliest
      // to be in cache still (a multimap keeps equal keys in insertion order).
      if (it != free_blocks_.end()) it = std::prev(free_blocks_.upper_bound(it->first));
      if (it != free_blocks_.end() && it->first <= size + size / 8) {
        ptr = it->second;
        stats_.cached -= static_cast<int64_t>(it->first);
        free_blocks_.erase(it);
      } else {
        ptr = std::aligned_alloc(kAlignment, size);
        if (!ptr && !free_blocks_.empty()) {  // out of memory: give the cache back and try once more
          release_cache();
          ptr = std::aligned_alloc(kAlignment, size);
        }
        if (ptr) blocks_[ptr] = {size, false};
        if (ptr) fresh_bytes = size;
      }
      if (ptr) blocks_[ptr].in_use = true;
    } else {
      ptr = std::aligned_alloc(kAlignment, (nbytes + kAlignment - 1) / kAlignment * kAlignment);
    }
    REMAT_CHECK(ptr != nullptr, "allocate: out of memory asking for {} bytes ({}) on {}", nbytes,
                category_name(category), device_.str());
    add(static_cast<int64_t>(nbytes), category);
    ++stats_.allocations;
  }
  if (fresh_bytes > 0) touch_pages(ptr, fresh_bytes);
  return ptr;
}

void Allocator::deallocate(void* ptr, size_t nbytes, MemoryCategory category) {
  if (device_.is_meta() || pool_) {
    if (pool_) pool_->deallocate(ptr);
    std::lock_guard lock(mutex_);
    add(-static_cast<int64_t>(nbytes), category);
    return;
  }
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  if (nbytes < kCacheMinBytes) {
    add(-static_cast<int64_t>(nbytes), category);
    std::free(ptr);
    return;
  }
  const auto it = blocks_.find(ptr);
  REMAT_CHECK(it != blocks_.end() && it->second.in_use, "deallocate: block {} of {} bytes was not allocated here or "
              "is already free", fmt::ptr(ptr), nbytes);
  add(-static_cast<int64_t>(nbytes), category);
  const size_t size = it->second.size;
  if (static_cast<size_t>(stats_.cached) + size > kMaxCachedBytes) {
    blocks_.erase(it);
    std::free(ptr);
    return;
  }
  it->second.in_use = false;
  free_blocks_.emplace(size, ptr);
  stats_.cached += static_cast<int64_t>(size);
}

void Allocator::empty_cache() {
  if (pool_) return pool_->empty_cache();
  std::lock_guard lock(mutex_);
  release_cache();
}

void Allocator::release_cache() {
  for (const auto& [size, ptr] : free_blocks_) {
    blocks_.erase(ptr);
    std::free(ptr);
  }
  free_blocks_.clear();
  stats_.cached = 0;
}

void Allocator::recategorize(size_t nbytes, MemoryCategory from, MemoryCategory to) {
  if (from == to || nbytes == 0) return;
  std::lock_guard lock(mutex_);
  add(-static_cast<int64_t>(nbytes), from);
  add(static_cast<int64_t>(nbytes), to);
}

void Allocator::count_borrowed(int64_t nbytes, MemoryCategory category) {
  std::lock_guard lock(mutex_);
  add(nbytes, category);
  if (nbytes > 0) ++stats_.allocations;
}

MemoryStats Allocator::stats() const {
  const int64_t pool_cached = pool_ ? pool_->stats().cached_bytes : 0;
  std::lock_guard lock(mutex_);
  MemoryStats stats = stats_;
  if (pool_) stats.cached = pool_cached;
  return stats;
}

int64_t Allocator::watch(int64_t* peak) {
  std::lock_guard lock(mutex_);
  *peak = stats_.live_transient;
  watches_.push_back(peak);
  return *peak;
}

void Allocator::unwatch(int64_t* peak) {
  std::lock_guard lock(mutex_);
  watches_.erase(std::remove(watches_.begin(), watches_.end(), peak), watches_.end());
}

int64_t Allocator::watched(const int64_t* peak) const {
  std::lock_guard lock(mutex_);
  return *peak;
}

void Allocator::reset_peaks() {
  std::lock_guard lock(mutex_);
  stats_.peak = stats_.live;
  stats_.peak_total = stats_.live_total;
  stats_.peak_transient = stats_.live_transient;
}

void Allocator::merge_peaks(const MemoryStats& floor) {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < kMemoryCategories; ++i) stats_.peak[i] = std::max(stats_.peak[i], floor.peak[i]);
  stats_.peak_total = std::max(stats_.peak_total, floor.peak_total);
  stats_.peak_transient = std::max(stats_.peak_transient, floor.peak_transient);
}

#if REMAT_HAVE_CUDA
namespace {

// A GPU's memory for its pool: cudaMalloc and cudaFree (kernels/cuda/runtime.h).
class CudaBackingStore final : public BackingStore {
 public:
  explicit CudaBackingStore(int device) : device_(device) {}
  void* reserve(size_t bytes) override { return kernels::cuda::device_malloc(bytes, device_); }
  void release(void* ptr, size_t bytes) override { kernels::cuda::device_free(ptr, device_); }
  std::string name() const override { return Device::cuda(device_).str(); }

 private:
  int device_;
};

}  // namespace
#endif

Allocator& allocator_for(Device device) {
  // Never destroyed: a tensor freed during static destruction still finds it.
  static Allocator* cpu = new Allocator(Device::cpu());
  static Allocator* meta = new Allocator(Device::meta());
  if (device.is_meta()) return *meta;
  if (device.is_cpu()) return *cpu;
#if REMAT_HAVE_CUDA
  static std::mutex mutex;
  static auto& gpus = *new std::vector<Allocator*>;  // made on first use, one per device; never destroyed either
  std::lock_guard lock(mutex);
  if (gpus.empty()) gpus.assign(static_cast<size_t>(kernels::cuda::device_count()), nullptr);
  REMAT_CHECK(device.index >= 0 && static_cast<size_t>(device.index) < gpus.size(), "allocator_for: no GPU {} here "
              "(this process sees {})", device.str(), gpus.size());
  Allocator*& gpu = gpus[static_cast<size_t>(device.index)];
  if (!gpu) gpu = new Allocator(device, std::make_unique<CachingPool>(std::make_unique<CudaBackingStore>(device.index)));
  return *gpu;
#else
  REMAT_FAIL("allocator_for: device {} is not available in this build (configured without CUDA)", device.str());
#endif
}

MemoryCategory current_category() { return t_category; }

CategoryGuard::CategoryGuard(MemoryCategory category) : previous_(t_category) { t_category = category; }
CategoryGuard::~CategoryGuard() { t_category = previous_; }

ScopedPeak::ScopedPeak(Device device) : ScopedPeak(allocator_for(device)) {}

ScopedPeak::ScopedPeak(Allocator& allocator) : allocator_(allocator), outer_(allocator_.stats()) {
  allocator_.reset_peaks();
}

ScopedPeak::~ScopedPeak() { allocator_.merge_peaks(outer_); }

TransientPeakWatch::TransientPeakWatch(Device device) : TransientPeakWatch(allocator_for(device)) {}

TransientPeakWatch::TransientPeakWatch(Allocator& allocator) : allocator_(allocator), start_(allocator_.watch(&peak_)) {}

TransientPeakWatch::~TransientPeakWatch() { allocator_.unwatch(&peak_); }

int64_t TransientPeakWatch::rise() const { return allocator_.watched(&peak_) - start_; }

}  // namespace remat
