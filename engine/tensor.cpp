// Tensor metadata, element access and raw copies; see tensor.h.
#include "engine/tensor.h"

#include "engine/backward.h"
#include "engine/factory.h"
#include "engine/kernel_call.h"
#include "kernels/copy.h"

namespace remat {

TensorImpl::~TensorImpl() {
  if (grad_fn) grad_fn->output_released();
  if (outside_input) outside_input->caller_released();
}

Tensor::Tensor(Shape shape, DType dtype, Device device) : impl_(std::make_shared<TensorImpl>()) {
  int64_t n = 1;
  for (int64_t s : shape) {
    REMAT_CHECK(s >= 0, "Tensor: negative size {} in shape {}", s, remat::str(shape));
    REMAT_CHECK(!__builtin_mul_overflow(n, s, &n) && n <= (int64_t{1} << 56), "Tensor: shape {} has too many elements",
                remat::str(shape));
  }
  impl_->storage = std::make_shared<Storage>(static_cast<size_t>(n) * dtype_size(dtype), device);
  impl_->strides = contiguous_strides(shape);
  impl_->shape = std::move(shape);
  impl_->dtype = dtype;
}

int64_t Tensor::size(int64_t axis) const { return shape()[normalize_axis(axis, dim(), "size")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape().size(); i-- > 0;) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

void Tensor::check_dtype(DType expected, const char* what) const {
  REMAT_CHECK(dtype() == expected, "{}: tensor {} holds {}, not {}", what, str(), dtype_name(dtype()),
              dtype_name(expected));
  REMAT_CHECK(!device().is_meta(), "{}: tensor {} is on the meta device, which holds shapes and byte counts, no "
              "values", what, str());
}

template <class T> T Tensor::item() const {
  REMAT_CHECK(!device().is_meta(), "item: tensor {} is on the meta device, which holds no values", str());
  REMAT_CHECK(numel() == 1, "item: tensor {} has {} elements, not 1", str(), numel());
  if (device().is_cuda()) return to_vector<T>().front();
  switch (dtype()) {
    case DType::Float32: return static_cast<T>(*static_cast<const float*>(raw_data()));
    case DType::Float64: return static_cast<T>(*static_cast<const double*>(raw_data()));
    case DType::Int64: return static_cast<T>(*static_cast<const int64_t*>(raw_data()));
    default: REMAT_FAIL("item: cannot read dtype {}", dtype_name(dtype()));
  }
}

template <class T> std::vector<T> Tensor::to_vector() const {
  if (device().is_cuda()) return to(*this, Device::cpu()).to_vector<T>();
  REMAT_CHECK(device().is_cpu(), "to_vector: tensor {} is on the meta device, which holds no values", str());
  const Tensor dense = is_contiguous() ? *this : contiguous_copy(*this);
  std::vector<T> out(static_cast<size_t>(numel()));
  auto convert = [&]<class S>(const S* src) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(src[i]);
  };
  switch (dtype()) {
    case DType::Float32: convert(dense.data<float>()); break;
    case DType::Float64: convert(dense.data<double>()); break;
    case DType::Int64: convert(dense.data<int64_t>()); break;
    default: REMAT_FAIL("to_vector: cannot read dtype {}", dtype_name(dtype()));
  }
  return out;
}

template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int64_t Tensor::item<int64_t>() const;
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;

Tensor& Tensor::requires_grad_(bool requires_grad) {
  REMAT_CHECK(is_leaf(), "requires_grad_: tensor {} is not a leaf (it was made by {}); use detach() first", str(),
              grad_fn()->name());
  REMAT_CHECK(!requires_grad || is_floating(dtype()), "requires_grad_: tensor {} has dtype {}; only float tensors "
              "can require gradients", str(), dtype_name(dtype()));
  impl_->requires_grad = requires_grad;
  return *this;
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const { run_backward(*this, grad, retain_graph); }

Tensor Tensor::detach() const { return alias(shape(), strides(), offset()); }

Tensor Tensor::alias(Shape shape, Strides strides, int64_t offset) const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = impl_->dtype;
  return Tensor(std::move(impl));
}

std::string Tensor::str() const {
  if (!defined()) return "undefined";
  return fmt::format("{} {} {}", dtype_name(dtype()), remat::str(shape()), device().str());
}

Tensor contiguous_copy(const Tensor& t) {
  Tensor out(t.shape(), t.dtype(), t.device());
  run_kernel(out, "contiguous", [&](auto stream) {
    strided_copy(out.raw_data(), t.raw_data(), dtype_size(t.dtype()), t.shape(), t.strides(), stream);
  });
  return out;
}

}  // namespace remat
