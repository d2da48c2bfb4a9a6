// TraceRecorder and TraceSpan; see trace.h.
#include "engine/trace.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "engine/allocator.h"
#include "engine/error.h"

namespace remat {
namespace {

thread_local TraceRecorder* t_recorder = nullptr;

double micros_since(std::chrono::steady_clock::time_point origin) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin).count();
}

}  // namespace

TraceRecorder::TraceRecorder() : origin_(std::chrono::steady_clock::now()), previous_(t_recorder) {
  t_recorder = this;
}

TraceRecorder::~TraceRecorder() { t_recorder = previous_; }

std::string TraceRecorder::json() const {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  // Phases on separate rows: forward and backward on thread 1, replays on 2.
  out += R"({"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "forward / backward"}},)" "\n";
  out += R"({"name": "thread_name", "ph": "M", "pid": 1, "tid": 2, "args": {"name": "replays"}})";
  for (const Event& e : events_) {
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

void TraceRecorder::save(const std::string& path) const {
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "w"), &std::fclose);
  REMAT_CHECK(file != nullptr, "trace: cannot write {}", path);
  const std::string text = json();
  REMAT_CHECK(std::fwrite(text.data(), 1, text.size(), file.get()) == text.size(), "trace: writing {} failed", path);
}

TraceSpan::TraceSpan(std::string_view category, std::string_view name) : recorder_(t_recorder) {
  if (!recorder_) return;
  index_ = recorder_->events_.size();
  recorder_->events_.push_back({.name = std::string(name),
                                .category = std::string(category),
                                .start_us = micros_since(recorder_->origin_),
                                .bytes_at_start = cpu_allocator().stats().live_transient});
}

TraceSpan::~TraceSpan() {
  if (!recorder_) return;
  TraceRecorder::Event& e = recorder_->events_[index_];
  e.end_us = micros_since(recorder_->origin_);
  e.bytes_at_end = cpu_allocator().stats().live_transient;
}

}  // namespace remat
