// Eviction of resident saved values under a runtime byte budget: the
// mechanism of dynamic tensor rematerialization (Kirisame et al., "Dynamic
// Tensor Rematerialization", ICLR 2021). Which value goes is a policy's
// (EvictionPolicy; scheduler/policies/dtr.h has the DTR heuristic). Not a
// planner: nothing here looks ahead or reads a profile. The Checkpointer of
// policy "dtr" makes one ResidentPool and installs it as its recording
// context's residency hook (engine/recompute.h, RecordingContext::residency).
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <memory>
#include <vector>

#include "engine/allocator.h"
#include "engine/device.h"
#include "engine/recompute.h"
#include "engine/tensor.h"

namespace remat {

// Note [Eviction]
// While a ResidentPool is the recording's (RecordingContext::residency), every
// node recorded is tagged Recompute (Note [Recompute]) but keeps its output
// resident, as its rebuilt copy, and keeps its replay inputs until its own
// backward has run: any value can be dropped, and rebuilt again, any number
// of times. The pool is the thread's MemoryPressureHandler
// (engine/allocator.h): before each activation or temporary allocation it
// compares the step's transient bytes (above their level at begin_step())
// plus the request with the budget; while over, it asks its policy for a
// victim among the evictable values and frees it. A value is evictable when
// freeing it frees bytes: nothing but resident copies held by the pool's
// nodes refers to its storage (not the caller's handle, not an op's
// argument list while it runs, not a saved value that holds it directly),
// and none of those nodes is pinned (Node::pin: the producers of the saved
// values of the backward node now running). The views of a storage go with
// it, as one candidate. An evicted value is rebuilt on demand by
// Node::rebuild(), on its materialised inputs, rebuilding evicted ones
// recursively; a replay redraws dropout masks from the recorded counter, so
// gradients stay bit-identical to keep-all. When nothing can be evicted the
// allocation goes ahead over the budget: counted (EvictionStats), never an
// error, so that a step always finishes; the report says by how much.
// One pool per thread is current: the latest begin_step() installs it.
class Node;

// One storage that eviction would free: the pool's nodes whose resident
// copies hold it (the value and its views), in recording order.
struct EvictionCandidate {
  std::vector<Node*> nodes;
  int64_t bytes = 0;
  uint64_t last_access = 0;  // the pool's clock at the latest access of any of them
};

class ResidentPool;

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  // The index in `candidates` (never empty) of the one to evict now.
  virtual size_t choose(const std::vector<EvictionCandidate>& candidates, const ResidentPool& pool) = 0;
};

struct EvictionStats {
  int64_t evictions = 0;      // storages freed by eviction
  int64_t evicted_bytes = 0;
  int64_t rebuilds = 0;       // replays of the pool's nodes (evicted values rebuilt)
  int64_t over_budget_allocations = 0;  // allocations made over budget: nothing was left to evict
  int64_t max_over_budget_bytes = 0;    // the largest excess over the budget they asked for
  // Wall time spent choosing and freeing victims (the policy's share of the
  // step's overhead; the rebuilds' is the Profiler's recompute time).
  double evicting_ms = 0;
};

class ResidentPool final : public MemoryPressureHandler, public Residency {
 public:
  // `budget`: transient bytes a step may rise by; on `device`'s allocator.
  ResidentPool(std::shared_ptr<EvictionPolicy> policy, int64_t budget, Device device);
  ~ResidentPool() override;
  ResidentPool(const ResidentPool&) = delete;
  ResidentPool& operator=(const ResidentPool&) = delete;

  // A step begins: the budget counts from the transient level now, the
  // statistics restart, and the pool becomes this thread's handler.
  void begin_step();
  void make_room(Allocator& allocator, size_t nbytes) override;

  int64_t budget() const { return budget_; }
  // The logical clock: one tick per access of a resident value (recorded,
  // read as an input, materialised, rebuilt). Staleness is measured on it.
  uint64_t now() const { return clock_; }
  const EvictionStats& stats() const { return stats_; }
  size_t resident_values() const { return resident_.size(); }

  // The residency hook (engine/recompute.h), called by the pool's nodes.
  void admit(Node& node) override;
  void rebuilt(Node& node) override;
  void touch(Node& node) override;
  void dropped(Node& node) override;
  void leave(Node& node) override;

 private:
  std::vector<EvictionCandidate> evictable() const;
  void evict(const EvictionCandidate& candidate);

  std::shared_ptr<EvictionPolicy> policy_;
  int64_t budget_;
  Device device_;
  Allocator* allocator_ = nullptr;  // device_'s, as placed at begin_step()
  int64_t level_ = 0;
  uint64_t clock_ = 0;
  // The nodes in the pool, each with the clock at its latest access.
  std::unordered_map<const Node*, uint64_t> last_access_;
  // From begin_step() until the step's last node leaves: allocations outside
  // a step (an optimizer's, the next batch's) are no business of the budget.
  bool active_ = false;
  bool busy_ = false;    // in make_room (its frees must not re-enter it)
  std::map<uint64_t, Node*> resident_;  // by sequence_nr: candidates in recording order
  EvictionStats stats_;
};

}  // namespace remat
