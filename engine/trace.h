// A memory timeline of a step, for Chrome's trace viewer and Perfetto: one
// event per forward node, backward node and replay, and a counter of live
// activation + temporary bytes sampled at each event's start and end. The
// trace is one more observer of the graph (Note [Graph events]): the nodes
// recorded while a TraceRecorder lives report their forward, replays and
// backward to it (those that run after it is gone are not traced).
//
//   TraceRecorder trace;          // listens to the nodes recorded while it lives
//   ... forward, backward ...
//   trace.save("step.json");      // open in ui.perfetto.dev or chrome://tracing
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/recording.h"

namespace remat {

class TraceRecorder {
 public:
  TraceRecorder();
  ~TraceRecorder();
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  struct Event {
    std::string name;      // the op
    std::string category;  // "forward", "backward" or "replay"
    double start_us = 0, end_us = 0;
    int64_t bytes_at_start = 0, bytes_at_end = 0;
  };
  const std::vector<Event>& events() const;
  // The Chrome trace-event JSON ("X" events and a "C" counter).
  std::string json() const;
  void save(const std::string& path) const;

 private:
  class Listener;  // the GraphObserver the nodes keep (trace.cpp)
  std::shared_ptr<Listener> listener_;
  GraphObserverScope scope_;
};

}  // namespace remat
