// The emulated GPU's streams and events behind cuda_runtime.h: each stream
// a queue of tasks (launches, copies, cuBLAS and NCCL calls), run in order
// when the host waits for them, with the waits between streams that a GPU
// has; see Note [Device memory and streams] in device.cpp.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/emulation/emulator.h"
#include "kernels/cuda/emulation/runtime.h"

struct CUstream_st {
  int device = 0;
  bool blocking = true;  // waits for the legacy stream, and it for this one
  bool legacy = false;
  bool destroyed = false;
  struct Queued {
    remat_emulation::Task task;
    uint64_t issue = 0;  // position in the host's order of every queued call
    std::vector<std::pair<CUstream_st*, uint64_t>> waits;  // streams to run up to a point first
  };
  std::deque<Queued> queue;
  uint64_t queued = 0;  // tasks ever queued
  uint64_t done = 0;    // tasks run
};

struct CUevent_st {
  CUstream_st* stream = nullptr;
  uint64_t position = 0;  // done when stream->done reaches it
  uint64_t generation = 0;
  bool timing = true;
  bool destroyed = false;
  double at_ms = 0;  // the emulator's clock when it completed
};

namespace remat_emulation {

std::recursive_mutex g_runtime_mutex;  // every stream, the arena, every task

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::unique_ptr<CUstream_st>> g_streams;  // kept to the end: events and waits point at them
std::vector<CUstream_st*> g_legacy;  // per device
uint64_t g_issue = 0;
const CUstream_st::Queued* g_running = nullptr;  // the task running now
CUstream_st* g_running_stream = nullptr;
const Clock::time_point g_epoch = Clock::now();

// The legacy stream of `device`.
CUstream_st* legacy_stream(int device) {
  const auto index = static_cast<size_t>(device);
  if (g_legacy.size() <= index) g_legacy.resize(index + 1, nullptr);
  if (g_legacy[index] == nullptr) {
    g_streams.push_back(std::make_unique<CUstream_st>());
    g_legacy[index] = g_streams.back().get();
    g_legacy[index]->legacy = true;
    g_legacy[index]->device = device;
  }
  return g_legacy[index];
}

std::string run_to(CUstream_st* s, uint64_t position);

// Runs one queued task (with its waits first); "" or its error.
std::string run_front(CUstream_st* s) {
  CUstream_st::Queued item = std::move(s->queue.front());
  s->queue.pop_front();
  std::string error;
  for (const auto& [other, position] : item.waits) {
    std::string e = run_to(other, position);
    if (error.empty()) error = std::move(e);
  }
  const CUstream_st::Queued* previous = g_running;
  CUstream_st* previous_stream = g_running_stream;
  g_running = &item;
  g_running_stream = s;
  std::string e = item.task.run();
  g_running = previous;
  g_running_stream = previous_stream;
  ++s->done;
  if (!e.empty()) {
    e = item.task.what + ": " + e;
    std::fprintf(stderr, "remat CUDA emulation: %s\n", e.c_str());
    set_error(item.task.code, e);
    if (error.empty()) error = std::move(e);
  }
  return error;
}

// Runs `s` until `position` tasks have run; the first error, if any.
std::string run_to(CUstream_st* s, uint64_t position) {
  DeviceAccess access;
  std::string error;
  while (s->done < position && !s->queue.empty()) {
    std::string e = run_front(s);
    if (error.empty()) error = std::move(e);
  }
  return error;
}

cudaError_t finish(const std::string& error) {
  if (error.empty()) return cudaSuccess;
  // Returned here once, not kept as the last error: unlike CUDA's
  // asynchronous errors, an emulated one does not spoil later calls.
  return cudaGetLastError();  // set by run_front
}

}  // namespace

// --- shared with the emulator's other parts ---------------------------------

cudaStream_t resolve(cudaStream_t stream) {
  std::lock_guard lock(g_runtime_mutex);
  if (stream == nullptr) return legacy_stream(current_device());
  return stream->destroyed ? nullptr : stream;
}

cudaError_t enqueue(cudaStream_t stream, Task task) {
  std::lock_guard lock(g_runtime_mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return set_error(cudaErrorInvalidResourceHandle, task.what + " on a destroyed stream");
  CUstream_st::Queued item{std::move(task), ++g_issue, {}};
  if (s->legacy) {
    for (const auto& other : g_streams) {
      if (other.get() != s && other->device == s->device && other->blocking && !other->destroyed) {
        item.waits.emplace_back(other.get(), other->queued);
      }
    }
  } else if (s->blocking) {
    CUstream_st* legacy = legacy_stream(s->device);
    item.waits.emplace_back(legacy, legacy->queued);
  }
  s->queue.push_back(std::move(item));
  ++s->queued;
  return cudaSuccess;
}

std::string unordered_earlier_work(cudaStream_t stream) {
  std::lock_guard lock(g_runtime_mutex);
  if (g_running == nullptr) return "";
  for (const auto& other : g_streams) {
    if (other.get() == g_running_stream || other->device != g_running_stream->device || other->queue.empty()) continue;
    const CUstream_st::Queued& first = other->queue.front();
    if (first.issue < g_running->issue) {
      return std::to_string(other->queue.size()) + " operation(s) queued earlier on another stream (first: " +
             first.task.what + ") have not run and nothing orders them before this one; make this stream wait "
             "for them (cudaStreamWaitEvent, or synchronise that stream first)";
    }
  }
  (void)stream;
  return "";
}

std::string check_stream_device(cudaStream_t stream, const char* what) {
  std::lock_guard lock(g_runtime_mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr || s->device == current_device()) return "";
  return std::string(what) + " queued on a stream of device " + std::to_string(s->device) + " while device " +
         std::to_string(current_device()) + " is current (cudaSetDevice to the stream's device first)";
}

}  // namespace remat_emulation

// --- cuda_runtime.h: streams and events ---------------------------------------

using namespace remat_emulation;

cudaError_t cudaDeviceSynchronize() {
  std::lock_guard lock(g_runtime_mutex);
  std::string error;
  for (size_t i = 0; i < g_streams.size(); ++i) {  // tasks may add streams? no: only host calls do
    CUstream_st* s = g_streams[i].get();
    std::string e = run_to(s, s->queued);
    if (error.empty()) error = std::move(e);
  }
  return finish(error);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  std::lock_guard lock(g_runtime_mutex);
  g_streams.push_back(std::make_unique<CUstream_st>());
  CUstream_st* s = g_streams.back().get();
  s->device = current_device();
  s->blocking = (flags & cudaStreamNonBlocking) == 0;
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  std::lock_guard lock(g_runtime_mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr || s->legacy) return set_error(cudaErrorInvalidResourceHandle, "cudaStreamDestroy");
  const std::string error = run_to(s, s->queued);  // its work completes, as on a GPU
  s->destroyed = true;
  return finish(error);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  std::lock_guard lock(g_runtime_mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return set_error(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize on a destroyed stream");
  return finish(run_to(s, s->queued));
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  // The emulated device runs a stream's work when it is asked about it.
  return cudaStreamSynchronize(stream);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  *event = new CUevent_st;
  (*event)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return set_error(cudaErrorInvalidResourceHandle, "cudaEventDestroy(null)");
  std::lock_guard lock(g_runtime_mutex);
  // A recorded event still queued keeps its record task pointing here: it
  // completes first.
  if (event->stream != nullptr && event->stream->done < event->position) run_to(event->stream, event->position);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  std::lock_guard lock(g_runtime_mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr || event == nullptr) return set_error(cudaErrorInvalidResourceHandle, "cudaEventRecord");
  const uint64_t generation = ++event->generation;
  event->stream = s;
  event->position = s->queued + 1;
  return enqueue(s, {"cudaEventRecord", [event, generation] {
                       if (event->generation == generation) {
                         event->at_ms = std::chrono::duration<double, std::milli>(Clock::now() - g_epoch).count();
                       }
                       return std::string();
                     }});
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  std::lock_guard lock(g_runtime_mutex);
  if (event == nullptr) return set_error(cudaErrorInvalidResourceHandle, "cudaEventSynchronize(null)");
  if (event->stream == nullptr) return cudaSuccess;  // never recorded: complete, as CUDA says
  return finish(run_to(event->stream, event->position));
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  std::lock_guard lock(g_runtime_mutex);
  if (event == nullptr) return set_error(cudaErrorInvalidResourceHandle, "cudaEventQuery(null)");
  if (event->stream == nullptr || event->stream->done >= event->position) return cudaSuccess;
  return cudaErrorNotReady;  // runs nothing; not an error kept for cudaGetLastError
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  std::lock_guard lock(g_runtime_mutex);
  if (start == nullptr || end == nullptr) return set_error(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime");
  if (!start->timing || !end->timing || start->stream == nullptr || end->stream == nullptr) {
    return set_error(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event without timing or never recorded");
  }
  if (start->stream->done < start->position || end->stream->done < end->position) {
    return set_error(cudaErrorNotReady, "cudaEventElapsedTime: an event has not completed");
  }
  *ms = static_cast<float>(end->at_ms - start->at_ms);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  std::lock_guard lock(g_runtime_mutex);
  (void)flags;
  if (event == nullptr) return set_error(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent(null event)");
  if (event->stream == nullptr) return cudaSuccess;  // never recorded: nothing to wait for
  CUstream_st* other = event->stream;
  const uint64_t position = event->position;
  return enqueue(stream, {"cudaStreamWaitEvent", [other, position] { return run_to(other, position); }});
}
