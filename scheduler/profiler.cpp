// The Profiler; see profiler.h.
#include "scheduler/profiler.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "engine/error.h"
#include "engine/meta.h"

namespace remat::scheduler {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

struct Profiler::Frame {
  enum class Kind { Forward, Replay, Backward, Pass };
  Kind kind = Kind::Forward;
  Node* node = nullptr;
  Profiler* owner = nullptr;
  // A backward or pass is measured on its first run only.
  bool measured = true;
  Clock::time_point start = Clock::now();
  double first_touch_at_start = first_touch_ms();
  // A forward's or backward's rise of transient bytes (on the allocator its
  // outputs come from: the meta one in a rehearsal).
  Allocator* allocator = nullptr;
  int64_t start_level = 0;
  std::unique_ptr<TransientPeakWatch> whole;
  // A backward's early release (NodeMeasures): the rise before it, the
  // live bytes either side of it, which saved value it freed, and the rise
  // after it.
  int64_t early_rise = 0, live_before_release = 0, live_after_release = 0;
  int released = -1;
  std::unique_ptr<TransientPeakWatch> late;
  ReplayStats replays_at_start;  // a pass's
  // On a GPU: the span's events, and a pass's replay time as its replays
  // resolve (shared with their Pending).
  std::optional<GpuSpan> gpu;
  std::shared_ptr<double> pass_replay_ms;

  void time_on(Device device) {
    GpuSpan span(placement(device));  // nothing in a rehearsal (meta)
    if (span.timed()) gpu.emplace(std::move(span));
  }
  void watch(Device device) {
    allocator = &allocator_for(placement(device));
    start_level = allocator->stats().live_transient;
    whole = std::make_unique<TransientPeakWatch>(*allocator);
  }
  // Wall time since the start, less first touches of fresh memory.
  double warm_ms() const { return ms_since(start) - (first_touch_ms() - first_touch_at_start); }
};

std::vector<Profiler::Frame>& Profiler::frames() {
  thread_local std::vector<Frame> stack;
  return stack;
}

std::optional<Profiler::Frame> Profiler::take(Node& node) {
  std::vector<Frame>& stack = frames();
  const auto mine = [this](const Frame& f) { return f.owner == this; };
  const auto innermost =
      std::find_if(stack.rbegin(), stack.rend(), [&](const Frame& f) { return mine(f) && f.node == &node; });
  if (innermost == stack.rend()) return std::nullopt;
  const auto at = std::prev(innermost.base());
  std::optional<Frame> frame(std::move(*at));
  // Its own frames above it were left by ops that threw; another Profiler's
  // (listening to the same nodes) are that one's to close.
  stack.erase(std::remove_if(at, stack.end(), mine), stack.end());
  return frame;
}

NodeMeasures& Profiler::measures(const Node& node) {
  const std::shared_ptr<NodeRecord>& record = node.shared_record();
  std::lock_guard lock(mutex_);
  Entry& entry = measures_[record.get()];
  if (entry.record.lock() == record) return entry.measured;
  entry = {.record = record, .measured = {}};  // new, or a gone record's address reused
  // Measures of records no one holds any more go, each time the count has
  // doubled (a Profiler of a long run sees millions of nodes).
  if (measures_.size() > 2 * kept_after_pruning_ + 1024) {
    std::erase_if(measures_, [](const auto& kv) { return kv.second.record.expired(); });
    kept_after_pruning_ = measures_.size();
  }
  return measures_.at(record.get()).measured;
}

NodeMeasures Profiler::measured(const NodeRecord& record) const {
  std::lock_guard lock(mutex_);
  const auto it = measures_.find(&record);
  const bool mine = it != measures_.end() && it->second.record.lock().get() == &record;
  return mine ? it->second.measured : NodeMeasures{};
}

size_t Profiler::nodes_measured() const {
  std::lock_guard lock(mutex_);
  return measures_.size();
}

void Profiler::add_pending(Pending pending) {
  pending.span.stop();
  std::lock_guard lock(mutex_);
  pending_.push_back(std::move(pending));
}

void Profiler::forward_started(Node& node, Device device) {
  Frame frame{.kind = Frame::Kind::Forward, .node = &node, .owner = this};
  frame.watch(device);
  frame.time_on(device);
  frames().push_back(std::move(frame));
}

void Profiler::forward_finished(Node& node) {
  std::optional<Frame> frame = take(node);
  if (!frame) return;
  NodeMeasures& measured = measures(node);
  measured.observed = true;
  measured.forward_peak_bytes = frame->whole->rise();
  if (frame->gpu) {
    add_pending({.field = Pending::Field::Forward, .record = node.shared_record(),
                 .span = std::move(*frame->gpu)});
  } else {
    measured.forward_ms = frame->warm_ms();
  }
}

void Profiler::replay_started(Node& node, Device device) {
  Frame frame{.kind = Frame::Kind::Replay, .node = &node, .owner = this};
  frame.time_on(device);
  frames().push_back(std::move(frame));
}

void Profiler::replayed(Node& node, bool in_place) {
  std::optional<Frame> frame = take(node);
  if (!frame) return;
  const NodeRecord& record = node.record();
  if (frame->gpu) {
    // Its time, when resolved, goes to the pass it ran in too.
    const std::vector<Frame>& stack = frames();
    const auto pass = std::find_if(stack.rbegin(), stack.rend(), [this](const Frame& f) {
      return f.kind == Frame::Kind::Pass && f.owner == this && f.pass_replay_ms;
    });
    add_pending({.field = in_place ? Pending::Field::ReplayInPlace : Pending::Field::Replay,
                 .record = node.shared_record(), .span = std::move(*frame->gpu),
                 .pass_replay_ms = pass == stack.rend() ? nullptr : pass->pass_replay_ms});
    std::lock_guard lock(mutex_);
    replays_.nodes += 1;
    replays_.flops += record.replay_flops;
    return;
  }
  // As forward times leave out first touches of fresh memory, so do replays.
  const double ms = frame->warm_ms();
  NodeMeasures& measured = measures(node);
  measured.replay_ms = in_place ? 0.0 : ms;
  measured.replay_in_place_ms = in_place ? ms : 0.0;
  std::lock_guard lock(mutex_);
  replays_.nodes += 1;
  replays_.ms += ms;
  replays_.flops += record.replay_flops;
}

void Profiler::backward_started(Node& node, const Tensor& grad_output) {
  Frame frame{.kind = Frame::Kind::Backward, .node = &node, .owner = this,
              .measured = !measures(node).backward_ran};
  if (frame.measured) {
    frame.watch(grad_output.device());
    frame.time_on(grad_output.device());
  }
  frames().push_back(std::move(frame));
}

Profiler::Frame* Profiler::open_backward(const Node& node) {
  std::vector<Frame>& stack = frames();
  const auto innermost = std::find_if(stack.rbegin(), stack.rend(), [this](const Frame& f) { return f.owner == this; });
  if (innermost == stack.rend() || innermost->node != &node || !innermost->measured) return nullptr;
  return &*innermost;
}

void Profiler::saved_value_releasing(Node& node) {
  Frame* open = open_backward(node);
  if (!open) return;
  Frame& frame = *open;
  frame.early_rise = frame.whole->rise();
  frame.live_before_release = frame.allocator->stats().live_transient;
}

void Profiler::saved_value_released(Node& node, int record_index) {
  Frame* open = open_backward(node);
  if (!open) return;
  Frame& frame = *open;
  REMAT_CHECK(frame.released < 0, "{}: backward released a second saved value early; the profile has room for one",
              node.name());
  frame.released = record_index;
  frame.live_after_release = frame.allocator->stats().live_transient;
  frame.late = std::make_unique<TransientPeakWatch>(*frame.allocator);
}

void Profiler::backward_finished(Node& node, const Tensor& grad_output, const Tensors& grads) {
  std::optional<Frame> frame = take(node);
  if (!frame || !frame->measured) return;
  NodeMeasures& measured = measures(node);
  measured.released_early = frame->released;
  if (frame->released < 0) {
    measured.backward_peak_bytes = frame->whole->rise();
    measured.backward_late_peak_bytes = 0;
  } else {
    const int64_t freed = frame->live_before_release - frame->live_after_release;
    measured.backward_peak_bytes = frame->early_rise;
    measured.backward_late_peak_bytes = frame->live_after_release + frame->late->rise() + freed - frame->start_level;
  }
  if (frame->gpu) {
    add_pending({.field = Pending::Field::Backward, .record = node.shared_record(),
                 .span = std::move(*frame->gpu)});
  } else {
    measured.backward_ms = frame->warm_ms();
  }
  measured.grad_bytes.assign(node.next_edges().size(), kNoGradient);
  for (size_t i = 0; i < grads.size() && i < measured.grad_bytes.size(); ++i) {
    if (!grads[i].defined()) continue;
    measured.grad_bytes[i] = grads[i].storage() == grad_output.storage()
                                 ? kGradientAliasesOutput
                                 : static_cast<int64_t>(grads[i].storage()->nbytes());
  }
  measured.backward_ran = true;
}

void Profiler::pass_started(Node& root, Device device) {
  Frame frame{.kind = Frame::Kind::Pass, .node = &root, .owner = this,
              .measured = !measures(root).backward_ran};
  if (frame.measured) frame.time_on(device);
  if (frame.gpu) {
    frame.pass_replay_ms = std::make_shared<double>(0.0);
  } else {
    std::lock_guard lock(mutex_);
    frame.replays_at_start = replays_;
  }
  frames().push_back(std::move(frame));
}

void Profiler::pass_finished(Node& root) {
  std::optional<Frame> frame = take(root);
  if (!frame || !frame->measured) return;
  NodeMeasures& measured = measures(root);
  if (frame->gpu) {
    add_pending({.field = Pending::Field::Pass, .record = root.shared_record(), .span = std::move(*frame->gpu),
                 .pass_replay_ms = frame->pass_replay_ms});
    return;
  }
  measured.backward_pass_ms = ms_since(frame->start);
  measured.backward_pass_replay_ms = replays().ms - frame->replays_at_start.ms;
  measured.backward_pass_first_touch_ms = first_touch_ms() - frame->first_touch_at_start;
}

void Profiler::failed(Node& node) { take(node); }

ReplayStats Profiler::replays() {
  resolve();
  std::lock_guard lock(mutex_);
  return replays_;
}

void Profiler::resolve() {
  std::vector<Pending> pending;
  {
    std::lock_guard lock(mutex_);
    pending.swap(pending_);
  }
  double replay_ms = 0;
  std::lock_guard lock(mutex_);
  // In the order they were queued: a pass after the replays it ran.
  for (Pending& p : pending) {
    const double ms = p.span.ms();
    NodeMeasures gone;  // for a node whose measures went with its record
    const auto it = measures_.find(p.record.get());
    NodeMeasures& measured = it == measures_.end() ? gone : it->second.measured;
    switch (p.field) {
      case Pending::Field::Forward: measured.forward_ms = ms; break;
      case Pending::Field::Backward: measured.backward_ms = ms; break;
      case Pending::Field::Replay:
      case Pending::Field::ReplayInPlace: {
        const bool in_place = p.field == Pending::Field::ReplayInPlace;
        measured.replay_ms = in_place ? 0.0 : ms;
        measured.replay_in_place_ms = in_place ? ms : 0.0;
        if (p.pass_replay_ms) *p.pass_replay_ms += ms;
        replay_ms += ms;
        break;
      }
      case Pending::Field::Pass:
        measured.backward_pass_ms = ms;
        measured.backward_pass_replay_ms = *p.pass_replay_ms;
        measured.backward_pass_first_touch_ms = 0;  // the GPU maps no pages
        break;
    }
  }
  replays_.ms += replay_ms;
}

Profiling::Profiling() : profiler_(std::make_shared<Profiler>()), scope_(profiler_) {}

}  // namespace remat::scheduler
