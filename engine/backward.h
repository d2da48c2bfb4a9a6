// The backward executor: given a root tensor and its gradient, runs every
// node that leads to a leaf needing a gradient, each once, after all its
// consumers (dependency counting, then a ready queue ordered latest-first),
// and adds the results into the leaves' .grad (category Gradient).
// Called through Tensor::backward().
#pragma once

#include <cstdint>

#include "engine/autograd.h"

namespace remat {

// The node that adds incoming gradients into a leaf's .grad.
class AccumulateGrad final : public Node {
 public:
  // Runs as soon as it is ready (highest sequence number), so that a
  // parameter's gradient leaves the transient counters at once.
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {
    mutable_record().sequence_nr = UINT64_MAX;
  }
  std::string_view name() const override { return "accumulate_grad"; }
  Tensor forward(const Tensors&) override;
  Tensors backward(const Tensor& grad_output) override;

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

// grad may be undefined only when root holds one element (it is then 1).
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);

}  // namespace remat
