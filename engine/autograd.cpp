// apply_op: running an op's forward and recording its node; see autograd.h.
#include "engine/autograd.h"

#include "engine/allocator.h"
#include "engine/backward.h"
#include "engine/meta.h"

namespace remat {
namespace {

thread_local bool t_grad_enabled = true;
thread_local bool t_retaining_graph = false;

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

void check_inputs(const Node& node, const Tensors& inputs) {
  for (const Tensor& input : inputs) {
    REMAT_CHECK(input.defined(), "{}: an input tensor is undefined", node.name());
    // A rehearsal reads real inputs (parameters, the batch) and makes meta ones.
    REMAT_CHECK(MetaScope::active() || input.device() == inputs.front().device(), "{}: inputs on different devices "
                "({} and {})", node.name(), inputs.front().str(), input.str());
  }
}

bool any_requires_grad(const Tensors& inputs) {
  for (const Tensor& input : inputs) {
    if (input.requires_grad()) return true;
  }
  return false;
}

}  // namespace

// The steps of recording one node, each on the node's private parts.
struct Recorder {
  // forward(), between its observers' events; the output gets a TensorImpl
  // of its own, since forward() may return an alias of an input (a view).
  static Tensor run_forward(Node& node, const Tensors& inputs) {
    const Device device = inputs.empty() ? Device::cpu() : inputs.front().device();
    node.notify([&](GraphObserver& o) { o.forward_started(node, device); });
    Tensor output;
    try {
      output = node.forward(inputs);
    } catch (...) {
      node.notify([&](GraphObserver& o) { o.failed(node); });
      throw;
    }
    node.notify([&](GraphObserver& o) { o.forward_finished(node); });
    return output.requires_grad() ? output.detach() : output;
  }

  // The record's name, place and output, before its inputs are looked at.
  static void describe(Node& node, const Tensor& output, const RecordingContext& context) {
    NodeRecord& record = *node.record_;
    record.op = std::string(node.name());
    record.sequence_nr = take_sequence_nr();
    record.block = context.block;
    record.module = context.module;
    record.region = context.region;
    record.output_shape = output.shape();
    record.output_dtype = output.dtype();
  }

  // The rest of the record's facts and the node's edges; returns whether
  // the output is a view of a dropped value.
  static bool link_inputs(Node& node, const Tensors& inputs, const Tensor& output) {
    NodeRecord& record = *node.record_;
    bool views_dropped = false;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].storage() != output.storage() || record.view_of >= 0) continue;
      record.view_of = static_cast<int>(i);
      views_dropped = inputs[i].grad_fn() && inputs[i].grad_fn()->tag() == Tag::Recompute;
    }
    const bool has_storage = output.storage() != nullptr;
    record.output_bytes = record.view_of >= 0 || !has_storage ? 0 : static_cast<int64_t>(output.storage()->nbytes());
    record.output_dense = has_storage && output.is_contiguous() && output.offset() == 0 &&
                          output.nbytes() == output.storage()->nbytes();
    node.edges_.reserve(inputs.size());
    for (const Tensor& input : inputs) {
      node.edges_.push_back(gradient_edge(input));
      record.input_shapes.push_back(input.shape());
      record.input_dtypes.push_back(input.dtype());
      InputSource source;
      if (input.grad_fn()) source.producer = input.grad_fn()->record().sequence_nr;
      if (!input.grad_fn() && input.requires_grad()) source.leaf = input.impl();
      if (!input.grad_fn() && is_transient(input.storage()->category())) source.outside = outside_input_of(input);
      record.inputs.push_back(source);
    }
    // Its FLOPs read the shapes just recorded; a record holds the replay's count.
    static_cast<OpTraits&>(record) = node.traits();
    if (record.replay_flops < 0) record.replay_flops = record.flops;
    return views_dropped;
  }
};

namespace {

// Dropped inputs that the node's region or tagger keeps from now on
// (a region's output read outside it; a block's under `blocks`).
void promote_inputs(const Node& node, const Tensors& inputs, const RecordingContext& context) {
  for (const Tensor& input : inputs) {
    Node* producer = input.grad_fn().get();
    if (!producer || producer->tag() != Tag::Recompute) continue;
    const uint64_t region = producer->record().region;
    const bool leaves_region = region != 0 && region != context.region;
    if (leaves_region || (context.tagger && context.tagger->keep_input(node, *producer))) {
      producer->promote_to_keep(input);
    }
  }
}

// Note [Recompute]: the tagger sees every node, so that it can count
// positions; a region and a residency hook drop everything, and a view of
// a dropped value is dropped.
Tag choose_tag(const Node& node, const RecordingContext& context, bool views_dropped) {
  const Tag asked = context.tagger ? context.tagger->tag(node) : Tag::Keep;
  const Tag chosen = context.region != 0 || context.residency ? Tag::Recompute : asked;
  return views_dropped ? Tag::Recompute : chosen;
}

}  // namespace

Tensor apply_op(std::shared_ptr<Node> node, const Tensors& inputs) {
  check_inputs(*node, inputs);
  if (!grad_enabled() || !any_requires_grad(inputs)) return node->forward(inputs);
  const RecordingContext& context = recording_context();
  node->observers_ = context.observers;
  Tensor output = Recorder::run_forward(*node, inputs);
  Recorder::describe(*node, output, context);
  promote_inputs(*node, inputs, context);
  const bool views_dropped = Recorder::link_inputs(*node, inputs, output);
  // The tag first, then the output's grad_fn, so that a node saving its own
  // output sees itself as the producer.
  node->record_->tag = choose_tag(*node, context, views_dropped);
  node->keep_replay_inputs(inputs);
  output.impl()->requires_grad = true;
  output.impl()->grad_fn = node;
  node->record_saved(inputs, output);
  node->keep_resident(context.residency, inputs, output);
  node->notify([&](GraphObserver& o) { o.recorded(*node); });
  return output;
}

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

bool grad_enabled() { return t_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

bool retaining_graph() { return t_retaining_graph; }
RetainGraphScope::RetainGraphScope(bool retain) : previous_(t_retaining_graph) { t_retaining_graph = retain; }
RetainGraphScope::~RetainGraphScope() { t_retaining_graph = previous_; }

}  // namespace remat
