// The backward executor; see backward.h.
//
// Two passes, as in PyTorch's engine: first count, for every node reachable
// from the root, how many edges point at it; then run nodes whose count has
// reached zero, latest-recorded first (which keeps live gradients few and
// frees saved values in reverse order of their creation).
#include "engine/backward.h"

#include <queue>
#include <unordered_map>

#include "engine/allocator.h"
#include "engine/kernel_call.h"
#include "kernels/binary.h"
#include "kernels/unary.h"

namespace remat {
namespace {

// a + b as a new tensor of a's shape and dtype; both contiguous or not.
Tensor add_gradients(const Tensor& a, const Tensor& b) {
  Tensor out(a.shape(), a.dtype(), a.device());
  dispatch_floating(a.dtype(), "accumulate gradients", [&]<class T>() {
    run_kernel(out, "accumulate gradients", [&](auto stream) {
      binary_forward<T>(kernels::BinaryOp::Add, out.data<T>(), a.data<T>(), a.strides(), b.data<T>(), b.strides(),
                        a.shape(), stream);
    });
  });
  return out;
}

// Adds `grad` into the buffer for one node's output.
void accumulate(Tensor& buffer, const Tensor& grad) { buffer = buffer.defined() ? add_gradients(buffer, grad) : grad; }


struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->record().sequence_nr < b->record().sequence_nr; }
};

// node.backward(grad_output) with its saved values rebuilt first, between
// the events its observer hears (Note [Graph events]).
Tensors run_node_backward(Node& node, const Tensor& grad_output) {
  // Note [Eviction]: what it reads stays resident until it has run.
  const SavedValuePins pins(node);
  node.materialize_saved();
  node.notify([&](GraphObserver& o) { o.backward_started(node, grad_output); });
  Tensors grads;
  try {
    grads = node.backward(grad_output);
  } catch (...) {
    node.notify([&](GraphObserver& o) { o.failed(node); });
    throw;
  }
  node.notify([&](GraphObserver& o) { o.backward_finished(node, grad_output, grads); });
  return grads;
}

}  // namespace

Tensor AccumulateGrad::forward(const Tensors&) { REMAT_FAIL("accumulate_grad has no forward"); }

Tensors AccumulateGrad::backward(const Tensor& grad_output) {
  Tensor leaf(leaf_);
  REMAT_CHECK(grad_output.shape() == leaf.shape(), "accumulate_grad: gradient of shape {} for a leaf of shape {}",
              str(grad_output.shape()), str(leaf.shape()));
  // A rehearsal (MetaScope) changes no real tensor: its gradient goes
  // nowhere, as a meta leaf's would be meta too.
  if (MetaScope::active() && !leaf.device().is_meta()) return {};
  Tensor grad = leaf.grad();
  if (!grad.defined()) {
    Tensor owned = owns_storage_alone(grad_output) ? grad_output : contiguous_copy(grad_output);
    owned.storage()->set_category(MemoryCategory::Gradient);
    leaf.set_grad(owned);
  } else {
    dispatch_floating(grad.dtype(), "accumulate_grad", [&]<class T>() {
      run_kernel(grad, "accumulate_grad", [&](auto stream) {
        binary_forward<T>(kernels::BinaryOp::Add, grad.data<T>(), grad.data<T>(), grad.strides(),
                          grad_output.data<T>(), grad_output.strides(), grad.shape(), stream);
      });
    });
    grad.storage()->bump_version();
  }
  return {};
}

namespace {

// run_backward's two passes, once the root is known to need a gradient.
void run_pass(const Tensor& root, const Tensor& grad, bool retain_graph) {
  RetainGraphScope retaining(retain_graph);
  NoGradGuard no_grad;
  CategoryGuard temporaries(MemoryCategory::Temporary);
  Tensor root_grad = grad;
  if (!root_grad.defined()) {
    REMAT_CHECK(root.numel() == 1, "backward: a gradient can be implied only for a one-element output; tensor {} "
                "has {} elements, so pass backward(grad) with a grad of shape {}", root.str(), root.numel(),
                str(root.shape()));
    root_grad = Tensor(root.shape(), root.dtype(), root.device());
    dispatch_floating(root.dtype(), "backward", [&]<class T>() {
      run_kernel(root_grad, "backward", [&](auto stream) { fill(root_grad.data<T>(), T(1), int64_t{1}, stream); });
    });
  }
  REMAT_CHECK(root_grad.shape() == root.shape() && root_grad.dtype() == root.dtype(),
              "backward: grad {} does not match output {}", root_grad.str(), root.str());

  std::shared_ptr<Node> root_node = gradient_edge(root).node;
  // Pass 1: dependency counts over the reachable graph.
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack{root_node.get()};
  dependencies[root_node.get()] = 0;
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& edge : node->next_edges()) {
      if (!edge.node) continue;
      auto [it, first_visit] = dependencies.try_emplace(edge.node.get(), 0);
      ++it->second;
      if (first_visit) stack.push_back(edge.node.get());
    }
  }

  // Pass 2: run ready nodes, latest first.
  std::unordered_map<Node*, Tensor> buffers;
  buffers[root_node.get()] = std::move(root_grad);
  std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
  ready.push(root_node.get());
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    Tensor grad_output = std::move(buffers[node]);
    buffers.erase(node);
    Tensors grad_inputs;
    if (grad_output.defined()) {
      grad_inputs = run_node_backward(*node, grad_output);
      grad_output = Tensor();
    }
    if (!retain_graph) node->release_saved();

    const auto& edges = node->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      Node* next = edges[i].node.get();
      if (!next) continue;
      if (i < grad_inputs.size() && grad_inputs[i].defined()) {
        const Shape& expected = node->record().input_shapes[i];
        REMAT_CHECK(grad_inputs[i].shape() == expected, "{} backward: gradient of input {} has shape {}, expected {}",
                    node->name(), i, str(grad_inputs[i].shape()), str(expected));
        REMAT_CHECK(grad_inputs[i].dtype() == node->record().input_dtypes[i], "{} backward: gradient of input {} is "
                    "{}, expected {}", node->name(), i, dtype_name(grad_inputs[i].dtype()),
                    dtype_name(node->record().input_dtypes[i]));
        accumulate(buffers[next], grad_inputs[i]);
        grad_inputs[i] = Tensor();
      }
      if (--dependencies[next] == 0) ready.push(next);
    }
  }
}

}  // namespace

void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph) {
  REMAT_CHECK(root.defined(), "backward: called on an undefined tensor");
  REMAT_CHECK(root.requires_grad(), "backward: tensor {} does not require grad and has no grad_fn", root.str());
  // The root's observers hear the pass (a leaf root has none).
  const std::shared_ptr<Node> root_fn = root.grad_fn();
  if (!root_fn || root_fn->observers().empty()) return run_pass(root, grad, retain_graph);
  root_fn->notify([&](GraphObserver& o) { o.pass_started(*root_fn, root.device()); });
  try {
    run_pass(root, grad, retain_graph);
  } catch (...) {
    root_fn->notify([&](GraphObserver& o) { o.failed(*root_fn); });
    throw;
  }
  root_fn->notify([&](GraphObserver& o) { o.pass_finished(*root_fn); });
}

}  // namespace remat
