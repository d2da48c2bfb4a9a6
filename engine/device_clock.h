// Timing a span of work where it runs: on the CPU the wall time of the
// span; on a GPU, where a kernel call only queues the work, CUDA events
// around it on the device's compute stream, read once the work has run.
//
//   GpuSpan span(device);      // a start event queued now
//   ... queue kernels ...
//   span.stop();               // the end event
//   double ms = span.ms();     // later: waits for the end event
#pragma once

#include "engine/device.h"

namespace remat {

// Events of one span on a GPU; empty (and of no use) on any other device.
class GpuSpan {
 public:
  explicit GpuSpan(Device device);
  ~GpuSpan();
  GpuSpan(GpuSpan&& other) noexcept;
  GpuSpan& operator=(GpuSpan&& other) noexcept;
  GpuSpan(const GpuSpan&) = delete;
  GpuSpan& operator=(const GpuSpan&) = delete;

  // True on a GPU of a CUDA build: then the span times the device.
  bool timed() const { return start_ != nullptr; }
  void stop();
  // The GPU milliseconds between construction and stop(); waits for the
  // work queued before stop() to complete. Error: not stopped.
  double ms() const;

 private:
  void* start_ = nullptr;
  void* end_ = nullptr;
  int device_ = 0;
};

}  // namespace remat
