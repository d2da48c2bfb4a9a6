// Recording nodes at forward time; see autograd.h.
#include "engine/autograd.h"

#include <atomic>
#include <chrono>

#include "engine/backward.h"

namespace remat {
namespace {

thread_local bool t_grad_enabled = true;
thread_local std::shared_ptr<const std::string> t_block;
std::atomic<uint64_t> g_next_sequence_nr{0};

}  // namespace

Tensor SavedValue::materialize(std::string_view op) const {
  REMAT_CHECK(!released_, "{}: its saved values were already freed by a backward pass; call backward(grad, "
              "/*retain_graph=*/true) to backward through a graph twice", op);
  REMAT_CHECK(!value_.defined() || value_.storage()->version() == version_, "{}: a tensor it saved for backward ({}) "
              "was modified in place after it was saved (version {}, now {}); for example an optimizer step ran "
              "between forward and backward", op, value_.str(), version_, value_.storage()->version());
  return value_;
}

void Node::release_saved() {
  for (SavedValue& value : saved_) value.release();
}

bool grad_enabled() { return t_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

BlockScope::BlockScope(std::string name) : previous_(t_block) {
  t_block = std::make_shared<const std::string>(std::move(name));
}
BlockScope::~BlockScope() { t_block = previous_; }

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

Tensor apply_op(std::shared_ptr<Node> node, const Tensors& inputs) {
  for (const Tensor& input : inputs) {
    REMAT_CHECK(input.defined(), "{}: an input tensor is undefined", node->name());
    REMAT_CHECK(input.device() == inputs.front().device(), "{}: inputs on different devices ({} and {})",
                node->name(), inputs.front().device().str(), input.device().str());
  }
  const auto start = std::chrono::steady_clock::now();
  Tensor output = node->forward(inputs);
  const double forward_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  bool needs_grad = false;
  for (const Tensor& input : inputs) needs_grad = needs_grad || input.requires_grad();
  if (!grad_enabled() || !needs_grad) return output;

  // forward() may return an alias of an input (a view); give the output its
  // own TensorImpl so that setting grad_fn touches nothing else.
  if (output.requires_grad()) {
    output = output.detach();
  }
  NodeRecord& record = node->record_;
  record.sequence_nr = g_next_sequence_nr++;
  record.output_shape = output.shape();
  record.output_dtype = output.dtype();
  record.block = t_block;
  record.forward_ms = forward_ms;
  bool is_view = false;
  for (const Tensor& input : inputs) is_view = is_view || input.storage() == output.storage();
  record.output_bytes = is_view || !output.storage() ? 0 : static_cast<int64_t>(output.storage()->nbytes());
  node->edges_.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    node->edges_.push_back(gradient_edge(input));
    record.input_shapes.push_back(input.shape());
    record.input_dtypes.push_back(input.dtype());
  }
  node->save(inputs, output);
  output.impl()->requires_grad = true;
  output.impl()->grad_fn = std::move(node);
  return output;
}

}  // namespace remat
