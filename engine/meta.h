// MetaScope: a step rehearsed on the meta device (engine/device.h), to plan
// it before it runs. Storage (engine/storage.cpp), the kernel dispatch
// (engine/kernel_call.h), leaf gradients (engine/backward.cpp) and the
// random generators (engine/rng.h) each follow it in one line.
#pragma once

#include "engine/device.h"

namespace remat {

// Rehearses work on the meta device: while one is open on this thread,
// every new storage is a meta one (counted by the meta allocator, backed by
// nothing) and no kernel runs (engine/kernel_call.h), whatever device the
// inputs are on. A forward and backward run inside one record the same
// nodes, shapes, views and byte counts as the real step, compute nothing,
// and change no tensor made before it: leaf gradients are not accumulated
// (engine/backward.cpp), in-place kernels do not run and random generators
// hand out counters without taking them (engine/rng.h). What is computed
// from data (a loss's value) is not there to read. Scopes nest.
class MetaScope {
 public:
  MetaScope();
  ~MetaScope();
  MetaScope(const MetaScope&) = delete;
  MetaScope& operator=(const MetaScope&) = delete;

  static bool active();  // on this thread

 private:
  bool previous_;
};

// Where a new storage asked for on `device` goes: the meta device while a
// MetaScope is open, else `device`. What measures an allocation reads the
// allocator of this device.
Device placement(Device device);

}  // namespace remat
