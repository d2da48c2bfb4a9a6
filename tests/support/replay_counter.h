// A GraphObserver for tests of the engine: counts the replays of the nodes
// recorded while it is current (engine/recording.h), without measuring.
//
//   auto replays = std::make_shared<ReplayCounter>();
//   { GraphObserverScope observing(replays); loss = f(x); }
//   loss.backward();
//   EXPECT_GT(replays->nodes, 0);
#pragma once

#include <cstdint>

#include "engine/autograd.h"
#include "engine/recording.h"

namespace remat {

struct ReplayCounter final : GraphObserver {
  int64_t nodes = 0;
  int64_t flops = 0;
  void replayed(Node& node, bool) override {
    ++nodes;
    flops += node.record().replay_flops;
  }
};

}  // namespace remat
