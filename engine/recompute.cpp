// Saved values and what becomes of a node's output after forward: kept,
// dropped and replayed (Note [Recompute]), or resident under a residency
// hook until evicted (Note [Eviction]); the node tells the hook, and nothing
// here knows the pool behind it. See recompute.h.
#include "engine/recompute.h"

#include "engine/autograd.h"

namespace remat {

SavedValue::SavedValue(const Tensor& value) {
  if (!value.defined()) return;
  holds_value_ = true;
  const std::shared_ptr<Node>& producer = value.grad_fn();
  if (producer && producer->tag() == Tag::Recompute) {
    producer_ = producer;
    recompute_ = true;
    producer->add_use();
    return;
  }
  value_ = value.detach();
  version_ = value.storage()->version();
}

SavedValue::SavedValue(SavedValue&& other) noexcept { *this = std::move(other); }

SavedValue& SavedValue::operator=(SavedValue&& other) noexcept {
  if (this != &other) {
    release();
    value_ = std::move(other.value_);
    producer_ = std::move(other.producer_);
    recompute_ = other.recompute_;
    version_ = other.version_;
    released_ = other.released_;
    holds_value_ = other.holds_value_;
    other.producer_.reset();
    other.recompute_ = false;
    other.released_ = true;
  }
  return *this;
}

SavedValue::~SavedValue() { release(); }

Tensor SavedValue::materialize(std::string_view op) const {
  REMAT_CHECK(!released_, "{}: its saved values were already freed by a backward pass; call backward(grad, "
              "/*retain_graph=*/true) to backward through a graph twice", op);
  if (recompute_) {
    const std::shared_ptr<Node> producer = producer_.lock();
    REMAT_CHECK(producer != nullptr, "{}: a saved value to rebuild has lost the node that made it", op);
    return producer->rebuild();
  }
  REMAT_CHECK(!value_.defined() || value_.storage()->version() == version_, "{}: a tensor it saved for backward ({}) "
              "was modified in place after it was saved (version {}, now {}); for example an optimizer step ran "
              "between forward and backward", op, value_.str(), version_, value_.storage()->version());
  return value_;
}

void SavedValue::release() {
  if (released_) return;
  released_ = true;
  value_ = Tensor();
  if (const std::shared_ptr<Node> producer = producer_.lock()) producer->drop_use();
  producer_.reset();
}

void Node::record_saved(const Tensors& inputs, const Tensor& output) {
  // save_value() classifies what it saves against these while save() runs.
  struct Recording {
    Node& node;
    ~Recording() {
      node.recording_inputs_ = nullptr;
      node.recording_output_ = nullptr;
    }
  } recording{*this};
  recording_inputs_ = &inputs;
  recording_output_ = &output;
  save(inputs, output);
}

void Node::save_value(const Tensor& value) {
  // Which input (or the output) it is: the same tensor first, then (a view
  // made inside save()) the same storage.
  int slot = kSavedSideResult;
  if (value.defined() && recording_inputs_) {
    const Tensors& inputs = *recording_inputs_;
    for (size_t i = 0; i < inputs.size() && slot == kSavedSideResult; ++i) {
      if (value.impl() == inputs[i].impl()) slot = static_cast<int>(i);
    }
    if (slot == kSavedSideResult && value.storage() == recording_output_->storage()) slot = kSavedOutput;
    for (size_t i = 0; i < inputs.size() && slot == kSavedSideResult; ++i) {
      if (value.storage() == inputs[i].storage()) slot = static_cast<int>(i);
    }
    if (slot == kSavedSideResult) record_->side_bytes += static_cast<int64_t>(value.storage()->nbytes());
  }
  if (value.defined()) record_->saved.push_back(slot);
  saved_.emplace_back(value);
}

void Node::materialize_saved() const {
  for (const SavedValue& value : saved_) {
    if (!value.is_released()) value.materialize(name());
  }
}

void Node::release_saved_now(size_t i) {
  REMAT_CHECK(i < saved_.size(), "{}: release_saved_now({}) of {} saved values", name(), i, saved_.size());
  if (retaining_graph()) return;  // a later backward through the graph reads it again
  notify([&](GraphObserver& o) { o.saved_value_releasing(*this); });
  saved_[i].release();
  if (!saved_[i].holds_value()) return;
  int record_index = 0;
  for (size_t j = 0; j < i; ++j) record_index += saved_[j].holds_value() ? 1 : 0;
  notify([&](GraphObserver& o) { o.saved_value_released(*this, record_index); });
}


Node::~Node() {
  if (residency_) residency_->leave(*this);
}

const GraphObservers& Node::observers() const {
  static const GraphObservers none;
  return observers_ ? *observers_ : none;
}

void Node::output_released() {
  if (record_->output_released_before == InputSource::kNone) record_->output_released_before = next_sequence_nr();
}

void OutsideInput::caller_released() {
  if (released_before == InputSource::kNone) released_before = next_sequence_nr();
}

bool owns_storage_alone(const Tensor& t) {
  return t.defined() && t.impl_ptr().use_count() == 1 && t.storage().use_count() == 1 && t.is_contiguous() &&
         t.offset() == 0 && t.nbytes() == t.storage()->nbytes();
}

void Node::keep_replay_inputs(const Tensors& inputs) {
  if (record_->tag != Tag::Recompute) return;
  for (const Tensor& input : inputs) replay_inputs_.emplace_back(input);
}

void Node::keep_resident(const std::shared_ptr<Residency>& residency, const Tensors& inputs, const Tensor& output) {
  if (!residency) return;
  // Note [Eviction]: resident until evicted; reading an input is an access.
  for (const Tensor& input : inputs) {
    Node* producer = input.grad_fn().get();
    if (producer && producer->residency_ && producer->rebuilt_.defined()) producer->residency_->touch(*producer);
  }
  residency_ = residency;
  rebuilt_ = output.detach();
  residency_->admit(*this);
}

void Node::evict() {
  evicted_ = true;
  rebuilt_ = Tensor();  // the last copy of a storage frees it
}

void Node::release_saved() {
  for (SavedValue& value : saved_) value.release();
  // This node's backward has run, so every consumer's already has: no one
  // will ask for a replay any more.
  for (SavedValue& input : replay_inputs_) input.release();
  if (residency_) {  // Note [Eviction]: nor for its resident output
    residency_->leave(*this);
    rebuilt_ = Tensor();
  }
}

void Node::drop_use() {
  if (--pending_uses_ > 0) return;
  // Nobody reads the output now: free the rebuilt copy. What a replay needs
  // stays: rebuild() released it already, or the output was never rebuilt
  // and a node recorded later (forward may still run) can still save it;
  // it goes with this node's own saved values.
  if (residency_ && rebuilt_.defined()) residency_->dropped(*this);
  rebuilt_ = Tensor();
}

void Node::promote_to_keep(const Tensor& output) {
  if (record_->tag == Tag::Keep) return;
  record_->tag = Tag::Keep;
  if (residency_) residency_->leave(*this);  // kept: never evicted
  if (pending_uses_ > 0 && !rebuilt_.defined()) rebuilt_ = output.detach();  // for the saved values made before
  for (SavedValue& input : replay_inputs_) input.release();
}

Tensor Node::rebuild() {
  if (rebuilt_.defined()) {
    if (residency_) residency_->touch(*this);
    return rebuilt_;
  }
  REMAT_CHECK(record_->tag == Tag::Recompute, "{}: asked to rebuild an output it kept", name());
  REMAT_CHECK(!replay_failed_, "{}: an earlier replay of it failed, after letting go of the inputs it needs", name());
  REMAT_CHECK(!replay_inputs_.empty() && !replay_inputs_.front().is_released(), "{}: asked to rebuild its output "
              "after its backward ran (the inputs a replay needs are gone)", name());
  Tensors inputs;
  inputs.reserve(replay_inputs_.size());
  for (const SavedValue& input : replay_inputs_) inputs.push_back(input.materialize(name()));
  // rebuilt_ will serve every later read until the last one, so the inputs
  // (themselves perhaps rebuilt) go with `inputs`, after forward(); until
  // then `inputs` may be all that refers to one (Note [Replays in place]).
  // A resident node's output may be evicted again (Note [Eviction]): it
  // keeps them, and never writes over one.
  if (!residency_) {
    for (SavedValue& input : replay_inputs_) input.release();
  }
  NoGradGuard no_grad;
  CategoryGuard activations(MemoryCategory::Activation);
  const Device device = inputs.empty() ? Device::cpu() : inputs.front().device();
  notify([&](GraphObserver& o) { o.replay_started(*this, device); });
  replaying_ = true;
  try {
    rebuilt_ = forward(inputs);
  } catch (...) {
    replaying_ = false;
    replay_failed_ = true;
    notify([&](GraphObserver& o) { o.failed(*this); });
    throw;
  }
  replaying_ = false;
  const int over = traits().overwritable_input;
  const bool in_place = over >= 0 && static_cast<size_t>(over) < inputs.size() &&
                        rebuilt_.storage() == inputs[static_cast<size_t>(over)].storage();
  discard_side_results();
  evicted_ = false;
  if (residency_) residency_->rebuilt(*this);
  notify([&](GraphObserver& o) { o.replayed(*this, in_place); });
  inputs.clear();
  return rebuilt_;
}

Tensor Node::new_output(const Tensors& inputs, const Shape& shape, DType dtype) const {
  const int over = traits().overwritable_input;
  if (replaying_ && over >= 0 && static_cast<size_t>(over) < inputs.size()) {
    const auto i = static_cast<size_t>(over);
    const Tensor& input = inputs[i];
    if (replay_writes_over_input(over, i, record_->inputs[i].producer != InputSource::kNone, owns_storage_alone(input),
                                 input.shape() == shape && input.dtype() == dtype)) {
      return input.detach();
    }
  }
  return Tensor(shape, dtype, inputs.empty() ? Device::cpu() : inputs.front().device());
}

SavedValuePins::SavedValuePins(const Node& node) {
  for (const SavedValue& value : node.saved_) {
    std::shared_ptr<Node> producer = value.producer();
    if (!producer || !producer->residency()) continue;
    producer->pin();
    pinned_.push_back(std::move(producer));
  }
}

SavedValuePins::~SavedValuePins() {
  for (const std::shared_ptr<Node>& node : pinned_) node->unpin();
}

}  // namespace remat
