// TraceRecorder; see trace.h.
#include "engine/trace.h"

#include <fmt/format.h>

#include <chrono>

#include "engine/allocator.h"
#include "engine/error.h"
#include "engine/file_write.h"
#include "engine/autograd.h"

namespace remat {

// Opens an event at each started event of a node and closes it at the
// matching finish (or failure); nothing once its recorder is gone.
class TraceRecorder::Listener final : public GraphObserver {
 public:
  void forward_started(Node& node, Device) override { open(node, "forward"); }
  void forward_finished(Node& node) override { close(node); }
  void replay_started(Node& node, Device) override { open(node, "replay"); }
  void replayed(Node& node, bool) override { close(node); }
  void backward_started(Node& node, const Tensor&) override { open(node, "backward"); }
  void backward_finished(Node& node, const Tensor&, const Tensors&) override { close(node); }
  void failed(Node& node) override { close(node); }

  std::vector<Event> events;
  bool closed = false;  // the recorder went

 private:
  double now_us() const {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_).count();
  }
  void open(const Node& node, const char* category) {
    if (closed) return;
    open_.push_back({&node, events.size()});
    events.push_back({.name = std::string(node.name()),
                      .category = category,
                      .start_us = now_us(),
                      .bytes_at_start = cpu_allocator().stats().live_transient});
  }
  // The innermost open event of `node`; a pass (failed on its root) opened none.
  void close(const Node& node) {
    for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
      if (it->first != &node) continue;
      Event& e = events[it->second];
      e.end_us = now_us();
      e.bytes_at_end = cpu_allocator().stats().live_transient;
      open_.erase(std::next(it).base());
      return;
    }
  }

  std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
  std::vector<std::pair<const Node*, size_t>> open_;  // node, index into events
};

TraceRecorder::TraceRecorder() : listener_(std::make_shared<Listener>()), scope_(listener_) {}

TraceRecorder::~TraceRecorder() { listener_->closed = true; }

const std::vector<TraceRecorder::Event>& TraceRecorder::events() const { return listener_->events; }

std::string TraceRecorder::json() const {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  // Phases on separate rows: forward and backward on thread 1, replays on 2.
  out += R"({"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "forward / backward"}},)" "\n";
  out += R"({"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "replays"}})";
  for (const Event& e : events()) {
    const int tid = e.category == "replay" ? 2 : 1;
    out += fmt::format(",\n{{\"name\": \"{}\", \"cat\": \"{}\", \"ph\": \"X\", \"pid\": 1, \"tid\": {}, \"ts\": {:.3f}, "
                       "\"dur\": {:.3f}, \"args\": {{\"live_bytes_at_end\": {}}}}}",
                       e.name, e.category, tid, e.start_us, e.end_us - e.start_us, e.bytes_at_end);
    for (auto [ts, bytes] : {std::pair{e.start_us, e.bytes_at_start}, std::pair{e.end_us, e.bytes_at_end}}) {
      out += fmt::format(",\n{{\"name\": \"live activation + temporary MiB\", \"ph\": \"C\", \"pid\": 1, \"ts\": "
                         "{:.3f}, \"args\": {{\"MiB\": {:.4f}}}}}", ts, bytes / (1024.0 * 1024.0));
    }
  }
  out += "\n]}\n";
  return out;
}

void TraceRecorder::save(const std::string& path) const { write_file_atomically(path, json()); }

}  // namespace remat
