// The resident pool of Note [Eviction]; see eviction.h. The pool keeps the
// books (which values are resident, when each was last read) and frees what
// its policy picks; Node (recompute.cpp) tells it what happens to each value
// through the Residency hook.
#include "engine/eviction.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "engine/autograd.h"
#include "engine/error.h"
#include "engine/meta.h"

namespace remat {

ResidentPool::ResidentPool(std::shared_ptr<EvictionPolicy> policy, int64_t budget, Device device)
    : policy_(std::move(policy)), budget_(budget), device_(device) {
  REMAT_CHECK(policy_ != nullptr, "eviction: a resident pool needs a policy");
  REMAT_CHECK(budget_ > 0, "eviction: the budget must be positive, got {} bytes", budget_);
}

ResidentPool::~ResidentPool() {
  if (memory_pressure_handler() == this) set_memory_pressure_handler(nullptr);
}

void ResidentPool::begin_step() {
  allocator_ = &allocator_for(placement(device_));
  level_ = allocator_->stats().live_transient;
  stats_ = {};
  active_ = true;
  set_memory_pressure_handler(this);
}

void ResidentPool::make_room(Allocator& allocator, size_t nbytes) {
  if (busy_ || !active_ || &allocator != allocator_) return;
  const auto excess = [&] {
    return allocator.stats().live_transient - level_ + static_cast<int64_t>(nbytes) - budget_;
  };
  if (excess() <= 0) return;
  busy_ = true;
  struct Done {
    ResidentPool& pool;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~Done() {
      pool.busy_ = false;
      pool.stats_.evicting_ms +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
  } done{*this};
  for (int64_t over = excess(); over > 0; over = excess()) {
    const std::vector<EvictionCandidate> candidates = evictable();
    if (candidates.empty()) {
      ++stats_.over_budget_allocations;
      stats_.max_over_budget_bytes = std::max(stats_.max_over_budget_bytes, over);
      return;
    }
    const size_t chosen = policy_->choose(candidates, *this);
    REMAT_CHECK(chosen < candidates.size(), "eviction: the policy chose candidate {} of {}", chosen,
                candidates.size());
    evict(candidates[chosen]);
  }
}

std::vector<EvictionCandidate> ResidentPool::evictable() const {
  std::vector<EvictionCandidate> groups;
  std::vector<bool> free_to_go;
  std::vector<long> holders;  // of each group's storage, TensorImpls of any owner
  std::unordered_map<const Storage*, size_t> group_of;
  for (const auto& [sequence_nr, node] : resident_) {
    const Tensor& value = node->resident_output();
    const auto [it, fresh] = group_of.try_emplace(value.storage().get(), groups.size());
    if (fresh) {
      groups.push_back({.bytes = static_cast<int64_t>(value.storage()->nbytes())});
      free_to_go.push_back(true);
      holders.push_back(value.storage().use_count());
    }
    EvictionCandidate& group = groups[it->second];
    group.nodes.push_back(node);
    group.last_access = std::max(group.last_access, last_access_.at(node));
    // Another handle on this TensorImpl (an op reading it) or a pin keeps it.
    if (node->pinned() || value.impl_ptr().use_count() != 1) free_to_go[it->second] = false;
  }
  std::vector<EvictionCandidate> candidates;
  for (size_t g = 0; g < groups.size(); ++g) {
    // Only the pool's resident copies hold the storage: freeing them frees it.
    const bool alone = holders[g] == static_cast<long>(groups[g].nodes.size());
    if (free_to_go[g] && alone && groups[g].bytes > 0) candidates.push_back(std::move(groups[g]));
  }
  return candidates;
}

void ResidentPool::evict(const EvictionCandidate& candidate) {
  for (Node* node : candidate.nodes) {
    resident_.erase(node->record().sequence_nr);
    node->evict();  // the last of them frees the storage
  }
  ++stats_.evictions;
  stats_.evicted_bytes += candidate.bytes;
}

void ResidentPool::admit(Node& node) {
  last_access_[&node] = 0;
  const Tensor& value = node.resident_output();
  if (value.defined() && value.storage()) resident_[node.record().sequence_nr] = &node;
  touch(node);
}

void ResidentPool::rebuilt(Node& node) {
  ++stats_.rebuilds;
  const bool member = last_access_.count(&node) > 0;
  if (member && node.resident_output().storage()) resident_[node.record().sequence_nr] = &node;
  touch(node);
}

void ResidentPool::touch(Node& node) {
  ++clock_;
  if (auto it = last_access_.find(&node); it != last_access_.end()) it->second = clock_;
}

void ResidentPool::dropped(Node& node) { resident_.erase(node.record().sequence_nr); }

void ResidentPool::leave(Node& node) {
  if (last_access_.erase(&node) == 0) return;
  resident_.erase(node.record().sequence_nr);
  if (last_access_.empty()) active_ = false;  // the step's graph is gone
}

}  // namespace remat
