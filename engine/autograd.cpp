// Recording nodes at forward time; see autograd.h.
#include "engine/autograd.h"

#include <atomic>

#include "engine/allocator.h"
#include "engine/backward.h"
#include "engine/eviction.h"
#include "engine/trace.h"

namespace remat {
namespace {

thread_local bool t_grad_enabled = true;
thread_local RecomputePolicy t_policy;
thread_local std::shared_ptr<GraphObserver> t_observer;
thread_local std::shared_ptr<const std::string> t_block;
thread_local uint64_t t_region = 0;
std::atomic<uint64_t> g_next_region{1};

}  // namespace

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
  if (observer_) observer_->saved_value_releasing(*this);
  saved_[i].release();
  if (observer_ && saved_[i].holds_value()) {
    int record_index = 0;
    for (size_t j = 0; j < i; ++j) record_index += saved_[j].holds_value() ? 1 : 0;
    observer_->saved_value_released(*this, record_index);
  }
}

namespace {
thread_local bool t_retaining_graph = false;
}  // namespace

bool retaining_graph() { return t_retaining_graph; }

RetainGraphScope::RetainGraphScope(bool retain) : previous_(t_retaining_graph) { t_retaining_graph = retain; }

RetainGraphScope::~RetainGraphScope() { t_retaining_graph = previous_; }

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

bool owns_storage_alone(const Tensor& t) {
  return t.defined() && t.impl_ptr().use_count() == 1 && t.storage().use_count() == 1 && t.is_contiguous() &&
         t.offset() == 0 && t.nbytes() == t.storage()->nbytes();
}

void OutsideInput::caller_released() {
  if (released_before == InputSource::kNone) released_before = next_sequence_nr();
}

void Node::output_released() {
  if (record_->output_released_before == InputSource::kNone) record_->output_released_before = next_sequence_nr();
}

Node::~Node() {
  if (pool_) pool_->leave(*this);
}

void Node::release_saved() {
  for (SavedValue& value : saved_) value.release();
  // This node's backward has run, so every consumer's already has: no one
  // will ask for a replay any more.
  for (SavedValue& input : replay_inputs_) input.release();
  if (pool_) {  // Note [Eviction]: nor for its resident output
    pool_->leave(*this);
    rebuilt_ = Tensor();
  }
}

void Node::drop_use() {
  if (--pending_uses_ > 0) return;
  // Nobody reads the output now: free the rebuilt copy. What a replay needs
  // stays: rebuild() released it already, or the output was never rebuilt
  // and a node recorded later (forward may still run) can still save it;
  // it goes with this node's own saved values.
  if (pool_ && rebuilt_.defined()) pool_->dropped(*this);
  rebuilt_ = Tensor();
}

void Node::promote_to_keep(const Tensor& output) {
  if (record_->tag == Tag::Keep) return;
  record_->tag = Tag::Keep;
  if (pool_) pool_->leave(*this);  // kept: never evicted
  if (pending_uses_ > 0 && !rebuilt_.defined()) rebuilt_ = output.detach();  // for the saved values made before
  for (SavedValue& input : replay_inputs_) input.release();
}

SavedValuePins::SavedValuePins(const Node& node) {
  for (const SavedValue& value : node.saved_) {
    std::shared_ptr<Node> producer = value.producer();
    if (!producer || !producer->pool_) continue;
    producer->pin();
    pinned_.push_back(std::move(producer));
  }
}

SavedValuePins::~SavedValuePins() {
  for (const std::shared_ptr<Node>& node : pinned_) node->unpin();
}

Tensor Node::rebuild() {
  if (rebuilt_.defined()) {
    if (pool_) pool_->touch(*this);
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
  if (!pool_) {
    for (SavedValue& input : replay_inputs_) input.release();
  }
  NoGradGuard no_grad;
  CategoryGuard activations(MemoryCategory::Activation);
  if (observer_) observer_->replay_started(*this, inputs.empty() ? Device::cpu() : inputs.front().device());
  TraceSpan span("replay", name());
  replaying_ = true;
  try {
    rebuilt_ = forward(inputs);
  } catch (...) {
    replaying_ = false;
    replay_failed_ = true;
    if (observer_) observer_->failed(*this);
    throw;
  }
  replaying_ = false;
  const int over = traits().overwritable_input;
  const bool in_place = over >= 0 && static_cast<size_t>(over) < inputs.size() &&
                        rebuilt_.storage() == inputs[static_cast<size_t>(over)].storage();
  discard_side_results();
  if (pool_) pool_->rebuilt(*this);
  if (observer_) observer_->replayed(*this, in_place);
  inputs.clear();
  return rebuilt_;
}

RecomputeScope::RecomputeScope(RecomputePolicy policy) : previous_(std::move(t_policy)) {
  t_policy = std::move(policy);
}
RecomputeScope::~RecomputeScope() { t_policy = std::move(previous_); }

const std::shared_ptr<GraphObserver>& current_graph_observer() { return t_observer; }

GraphObserverScope::GraphObserverScope(std::shared_ptr<GraphObserver> observer) : previous_(std::move(t_observer)) {
  t_observer = std::move(observer);
}
GraphObserverScope::~GraphObserverScope() { t_observer = std::move(previous_); }

bool grad_enabled() { return t_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

BlockScope::BlockScope(std::string name) : previous_(t_block) {
  t_block = std::make_shared<const std::string>(std::move(name));
}
BlockScope::~BlockScope() { t_block = previous_; }

CheckpointRegion::CheckpointRegion() : previous_(t_region) { t_region = g_next_region++; }
CheckpointRegion::~CheckpointRegion() { t_region = previous_; }

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  if (t.grad_fn()) return {t.grad_fn()};
  // A leaf: one AccumulateGrad per leaf while any graph holds it.
  TensorImpl* impl = t.impl();
  std::shared_ptr<Node> accumulator = impl->grad_accumulator.lock();
  if (!accumulator) {
    accumulator = std::make_shared<AccumulateGrad>(t.impl_ptr());
    impl->grad_accumulator = accumulator;
  }
  return {accumulator};
}

namespace {

// The OutsideInput of `t`'s handle, made when a recorded node first reads
// it (Note [Inputs from outside the graph]).
std::shared_ptr<OutsideInput> outside_input_of(const Tensor& t) {
  std::shared_ptr<OutsideInput>& outside = t.impl()->outside_input;
  if (!outside) {
    const Storage& storage = *t.storage();
    outside = std::make_shared<OutsideInput>();
    outside->storage = &storage;
    outside->bytes = static_cast<int64_t>(storage.nbytes());
    outside->made_before = storage.made_before();
  }
  return outside;
}

}  // namespace

Tensor apply_op(std::shared_ptr<Node> node, const Tensors& inputs) {
  for (const Tensor& input : inputs) {
    REMAT_CHECK(input.defined(), "{}: an input tensor is undefined", node->name());
    // A rehearsal reads real inputs (parameters, the batch) and makes meta ones.
    REMAT_CHECK(MetaScope::active() || input.device() == inputs.front().device(), "{}: inputs on different devices "
                "({} and {})", node->name(), inputs.front().str(), input.str());
  }
  bool needs_grad = false;
  for (const Tensor& input : inputs) needs_grad = needs_grad || input.requires_grad();
  if (!grad_enabled() || !needs_grad) return node->forward(inputs);

  node->observer_ = t_observer;
  GraphObserver* observer = node->observer_.get();
  if (observer) observer->forward_started(*node, inputs.empty() ? Device::cpu() : inputs.front().device());
  Tensor output;
  try {
    TraceSpan span("forward", node->name());
    output = node->forward(inputs);
  } catch (...) {
    if (observer) observer->failed(*node);
    throw;
  }
  if (observer) observer->forward_finished(*node);

  // forward() may return an alias of an input (a view); give the output its
  // own TensorImpl so that setting grad_fn touches nothing else.
  if (output.requires_grad()) {
    output = output.detach();
  }
  NodeRecord& record = *node->record_;
  record.op = std::string(node->name());
  record.sequence_nr = take_sequence_nr();
  record.block = t_block;
  record.output_shape = output.shape();
  record.output_dtype = output.dtype();
  record.region = t_region;
  for (const Tensor& input : inputs) {
    Node* producer = input.grad_fn().get();
    if (!producer || producer->tag() != Tag::Recompute) continue;
    const bool leaves_region = producer->record().region != 0 && producer->record().region != t_region;
    if (leaves_region || (t_policy.keep_input && t_policy.keep_input(*node, *producer))) {
      producer->promote_to_keep(input);
    }
  }
  bool views_dropped = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& input = inputs[i];
    if (input.storage() != output.storage() || record.view_of >= 0) continue;
    record.view_of = static_cast<int>(i);
    views_dropped = input.grad_fn() && input.grad_fn()->tag() == Tag::Recompute;
  }
  record.output_bytes = record.view_of >= 0 || !output.storage() ? 0 : static_cast<int64_t>(output.storage()->nbytes());
  record.output_dense = output.storage() && output.is_contiguous() && output.offset() == 0 &&
                        output.nbytes() == output.storage()->nbytes();
  node->edges_.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    node->edges_.push_back(gradient_edge(input));
    record.input_shapes.push_back(input.shape());
    record.input_dtypes.push_back(input.dtype());
    InputSource source;
    if (input.grad_fn()) source.producer = input.grad_fn()->record().sequence_nr;
    if (!input.grad_fn() && input.requires_grad()) source.leaf = input.impl();
    if (!input.grad_fn() && is_transient(input.storage()->category())) source.outside = outside_input_of(input);
    record.inputs.push_back(source);
  }
  const OpTraits traits = node->traits();  // its FLOPs read the shapes just recorded
  record.overwritable_input = traits.overwritable_input;
  record.replay_reuses_side_results = traits.replay_reuses_side_results;
  record.compute_bound = traits.compute_bound;
  record.flops = traits.flops;
  record.replay_flops = traits.replay_flops >= 0 ? traits.replay_flops : traits.flops;
  // Note [Recompute]: the tag first, then the output's grad_fn, so that a
  // node saving its own output sees itself as the producer. The policy sees
  // every node, so that it can count positions.
  const Tag asked = t_policy.tag ? t_policy.tag(*node) : Tag::Keep;
  const Tag chosen = t_region != 0 || t_policy.pool ? Tag::Recompute : asked;
  record.tag = views_dropped ? Tag::Recompute : chosen;
  if (record.tag == Tag::Recompute) {
    for (const Tensor& input : inputs) node->replay_inputs_.emplace_back(input);
  }
  output.impl()->requires_grad = true;
  output.impl()->grad_fn = node;
  {
    // save_value() classifies what it saves against these while save() runs.
    struct Recording {
      Node& node;
      ~Recording() {
        node.recording_inputs_ = nullptr;
        node.recording_output_ = nullptr;
      }
    } recording{*node};
    node->recording_inputs_ = &inputs;
    node->recording_output_ = &output;
    node->save(inputs, output);
  }
  if (t_policy.pool) {
    // Note [Eviction]: resident until evicted; reading an input is an access.
    for (const Tensor& input : inputs) {
      Node* producer = input.grad_fn().get();
      if (producer && producer->pool_ && producer->rebuilt_.defined()) producer->pool_->touch(*producer);
    }
    node->pool_ = t_policy.pool;
    node->rebuilt_ = output.detach();
    node->pool_->admit(*node);
  }
  if (observer) observer->recorded(*node);
  return output;
}

}  // namespace remat
