// Tensor: a shared handle to a view (shape, strides, offset, dtype) of a
// Storage, plus its autograd state (requires_grad, grad, grad_fn).
//
//   Tensor w = randn({3, 2}).requires_grad_();   // a leaf
//   Tensor y = sum(matmul(x, w));                // y.grad_fn() is a Node
//   y.backward();                                // w.grad() is now (3, 2)
//
// Copies of a Tensor share everything (like torch.Tensor). The differentiable
// operations on tensors are free functions in ops/; this file has only what
// the engine itself needs: metadata, raw aliasing, element access.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/dtype.h"
#include "engine/shape.h"
#include "engine/storage.h"

namespace remat {

class Node;
struct OutsideInput;
class Tensor;
using Tensors = std::vector<Tensor>;

struct TensorImpl {
  // Tells grad_fn that the caller let its output go, and outside_input that
  // the caller let this input go.
  ~TensorImpl();

  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;

  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;    // leaves only; category Gradient
  std::shared_ptr<Node> grad_fn;       // non-leaves: the node that made this
  std::weak_ptr<Node> grad_accumulator;  // leaves: cached AccumulateGrad node
  // Set when a recorded node reads this tensor as an input from outside the
  // graph held in activation bytes (engine/record.h, Note [Inputs from
  // outside the graph]).
  std::shared_ptr<OutsideInput> outside_input;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  // A new contiguous tensor of `shape`; its bytes are not initialised.
  Tensor(Shape shape, DType dtype, Device device = Device::cpu());

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  const Shape& shape() const { return impl_->shape; }
  const Strides& strides() const { return impl_->strides; }
  int64_t offset() const { return impl_->offset; }
  int64_t dim() const { return static_cast<int64_t>(impl_->shape.size()); }
  int64_t size(int64_t axis) const;  // negative axes count from the end
  int64_t numel() const { return remat::numel(impl_->shape); }
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->storage->device(); }
  const std::shared_ptr<Storage>& storage() const { return impl_->storage; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  bool is_contiguous() const;

  // Pointer to element 0 of this view; T must match dtype().
  template <class T> T* data() const {
    check_dtype(dtype_of<T>(), "data");
    return static_cast<T*>(impl_->storage->data()) + impl_->offset;
  }
  void* raw_data() const {
    return static_cast<char*>(impl_->storage->data()) + impl_->offset * static_cast<int64_t>(dtype_size(dtype()));
  }
  // The single element of a one-element tensor, converted to T.
  template <class T> T item() const;
  // The elements in row-major order, converted to T (reads any strides).
  template <class T> std::vector<T> to_vector() const;

  // Autograd state.
  bool requires_grad() const { return impl_->requires_grad; }
  // Marks a leaf as needing a gradient; an error on a non-leaf.
  Tensor& requires_grad_(bool requires_grad = true);
  bool is_leaf() const { return impl_->grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return impl_->grad_fn; }
  Tensor grad() const { return Tensor(impl_->grad); }
  void set_grad(const Tensor& grad) const { impl_->grad = grad.impl_; }
  // Runs the backward pass from this tensor; see engine/backward.h.
  void backward(const Tensor& grad = {}, bool retain_graph = false) const;
  // The same data with no autograd history.
  Tensor detach() const;

  // A view of the same storage with other metadata and no autograd history;
  // differentiable views are built on this in ops/.
  Tensor alias(Shape shape, Strides strides, int64_t offset) const;

  // "float32 (2, 3) cpu"
  std::string str() const;

 private:
  void check_dtype(DType expected, const char* what) const;

  std::shared_ptr<TensorImpl> impl_;
};

// A contiguous copy with no autograd history (a tensor that is already
// contiguous is copied too); the copy's storage takes the current category.
Tensor contiguous_copy(const Tensor& t);

// t itself when contiguous, else contiguous_copy(t): what a kernel that reads
// dense memory calls on its inputs. No autograd history is recorded.
inline Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : contiguous_copy(t); }

}  // namespace remat
