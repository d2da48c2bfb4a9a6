// The recording context and its scopes; see recording.h.
#include "engine/recording.h"

#include <atomic>

namespace remat {
namespace {

// The one piece of recording state per thread: which context is installed.
thread_local const RecordingContext* t_context = nullptr;
thread_local int t_open_scopes = 0;
std::atomic<uint64_t> g_next_region{1};

RecordingContext with_tagger(Tagger* tagger, std::shared_ptr<Residency> residency) {
  RecordingContext context = recording_context();
  context.tagger = tagger;
  context.residency = std::move(residency);
  return context;
}

RecordingContext with_observer(std::shared_ptr<GraphObserver> observer) {
  RecordingContext context = recording_context();
  auto observers = context.observers ? std::make_shared<GraphObservers>(*context.observers)
                                     : std::make_shared<GraphObservers>();
  observers->push_back(std::move(observer));
  context.observers = std::move(observers);
  return context;
}

RecordingContext with_block(std::string name) {
  RecordingContext context = recording_context();
  context.block = std::make_shared<const std::string>(std::move(name));
  return context;
}

RecordingContext in_module(std::string path) {
  RecordingContext context = recording_context();
  context.module = std::make_shared<const std::string>(std::move(path));
  return context;
}

RecordingContext in_new_region() {
  RecordingContext context = recording_context();
  context.region = g_next_region++;
  return context;
}

}  // namespace

const RecordingContext& recording_context() {
  static const RecordingContext none;
  return t_context ? *t_context : none;
}

RecordingScope::RecordingScope(RecordingContext context) : context_(std::move(context)), previous_(t_context) {
  t_context = &context_;
  ++t_open_scopes;
}

RecordingScope::~RecordingScope() {
  t_context = previous_;
  --t_open_scopes;
}

int RecordingScope::open_on_this_thread() { return t_open_scopes; }

RecomputeScope::RecomputeScope(Tagger* tagger, std::shared_ptr<Residency> residency)
    : scope_(with_tagger(tagger, std::move(residency))) {}

RecomputeScope::RecomputeScope(TagPolicy rule)
    : rule_(std::make_unique<TagRule>(std::move(rule))), scope_(with_tagger(rule_.get(), nullptr)) {}

GraphObserverScope::GraphObserverScope(std::shared_ptr<GraphObserver> observer)
    : scope_(with_observer(std::move(observer))) {}

BlockScope::BlockScope(std::string name) : scope_(with_block(std::move(name))) {}

ModuleScope::ModuleScope(std::string path) : scope_(in_module(std::move(path))) {}

CheckpointRegion::CheckpointRegion() : scope_(in_new_region()) {}

}  // namespace remat
