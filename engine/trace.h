// A memory timeline of a step, for Chrome's trace viewer and Perfetto: one
// event per forward node, backward node and replay, and a counter of live
// activation + temporary bytes sampled at each event's start and end.
//
//   TraceRecorder trace;          // records this thread's events while it lives
//   ... forward, backward ...
//   trace.save("step.json");      // open in ui.perfetto.dev or chrome://tracing
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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
  const std::vector<Event>& events() const { return events_; }
  // The Chrome trace-event JSON ("X" events and a "C" counter).
  std::string json() const;
  void save(const std::string& path) const;

 private:
  friend class TraceSpan;
  std::chrono::steady_clock::time_point origin_;
  std::vector<Event> events_;
  TraceRecorder* previous_;
};

// One event, from construction to destruction, on this thread's recorder
// (nothing when none is recording). The engine opens one per node it runs.
class TraceSpan {
 public:
  TraceSpan(std::string_view category, std::string_view name);
  ~TraceSpan();
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  TraceRecorder* recorder_;
  size_t index_ = 0;
};

}  // namespace remat
