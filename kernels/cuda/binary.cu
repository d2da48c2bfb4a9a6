// Binary elementwise ops with broadcasting on the GPU; see binary.h. One
// thread an output element; out may be a itself (gradient accumulation).
#include "kernels/cuda/binary.h"

#include "kernels/cuda/launch.cuh"

namespace remat::kernels::cuda {
namespace {

template <BinaryOp kOp, class T>
void binary_op(T* out, const T* a, const T* b, const StridedArgs<2>& args, int64_t n, Stream stream) {
  launch_elementwise(n, stream, [=] __device__(int64_t i) {
    const Offsets<2> at = offsets_of(args, i);
    const T x = a[at.at[0]], y = b[at.at[1]];
    T result;
    if constexpr (kOp == BinaryOp::Add) result = x + y;
    if constexpr (kOp == BinaryOp::Sub) result = x - y;
    if constexpr (kOp == BinaryOp::Mul) result = x * y;
    if constexpr (kOp == BinaryOp::Div) result = x / y;
    out[i] = result;
  });
}

}  // namespace

template <class T>
void binary_forward(BinaryOp op, T* out, const T* a, const std::vector<int64_t>& a_strides, const T* b,
                    const std::vector<int64_t>& b_strides, const std::vector<int64_t>& shape, Stream stream) {
  const StridedArgs<2> args = strided_args<2>(shape, {&a_strides, &b_strides});
  const int64_t n = numel_of(shape);
  switch (op) {
    case BinaryOp::Add: return binary_op<BinaryOp::Add>(out, a, b, args, n, stream);
    case BinaryOp::Sub: return binary_op<BinaryOp::Sub>(out, a, b, args, n, stream);
    case BinaryOp::Mul: return binary_op<BinaryOp::Mul>(out, a, b, args, n, stream);
    case BinaryOp::Div: return binary_op<BinaryOp::Div>(out, a, b, args, n, stream);
  }
}

template void binary_forward<float>(BinaryOp, float*, const float*, const std::vector<int64_t>&, const float*,
                                    const std::vector<int64_t>&, const std::vector<int64_t>&, Stream);
template void binary_forward<double>(BinaryOp, double*, const double*, const std::vector<int64_t>&, const double*,
                                     const std::vector<int64_t>&, const std::vector<int64_t>&, Stream);

}  // namespace remat::kernels::cuda
