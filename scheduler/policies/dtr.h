// Policy dtr: dynamic tensor rematerialization (Kirisame et al., "Dynamic
// Tensor Rematerialization", ICLR 2021). No plan and no profile: a runtime
// byte budget, and when an allocation would exceed it, the resident value
// of least h(v) = cost(v) / (bytes(v) x staleness(v)) is evicted, to be
// rebuilt on demand (the mechanism is engine/eviction.h, Note [Eviction]).
// The Checkpointer of policy "dtr" makes its pool here (make_dtr_pool);
// this file decides only which candidate goes.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/autograd.h"
#include "engine/eviction.h"
#include "scheduler/profiler.h"

namespace remat::scheduler {

struct DtrOptions {
  // cost(v) counts the evicted ancestors a rebuild of v would replay too
  // (DTR's e* neighbourhood, walked exactly through the graph's edges), not
  // only v's own replay.
  bool neighbourhood = true;
  // Price a replay by the forward time this Profiler measured where it did;
  // by default (null) by a fixed roofline of its FLOPs and bytes (the
  // nominal clock of scheduler/search.cpp), the same on every run and
  // machine, so that which values are evicted, and so the peaks and
  // replays, reproduce.
  std::shared_ptr<const Profiler> measured_costs;
};

class DtrPolicy final : public EvictionPolicy {
 public:
  explicit DtrPolicy(DtrOptions options = {}) : options_(options) {}
  // The candidate of least score(); the first (earliest recorded) of equals.
  size_t choose(const std::vector<EvictionCandidate>& candidates, const ResidentPool& pool) override;
  // h = cost / (bytes x staleness), staleness = the pool's clock ticks since
  // the candidate's last access, plus one.
  double score(const EvictionCandidate& candidate, const ResidentPool& pool) const;
  // What rebuilding the candidate would replay: its nodes, and (with
  // neighbourhood) the evicted ancestors they would rebuild first, in ms.
  double rebuild_cost_ms(const EvictionCandidate& candidate) const;
  // One replay of `node`'s forward, in ms (measured or nominal).
  double replay_ms(const Node& node) const;

 private:
  DtrOptions options_;
};

// The pool a dtr step records into: `budget` bytes of transient rise per
// step on `device`, victims chosen by DtrPolicy.
std::shared_ptr<ResidentPool> make_dtr_pool(int64_t budget, Device device, DtrOptions options = {});

}  // namespace remat::scheduler
