// Binary elementwise ops with broadcasting on the GPU; see binary.h. Shapes
// whose strides merge into at most two axes (every contiguous operand, a
// bias or a scalar broadcast) go through map_rows (elementwise.cuh: no index
// division, 16-byte loads where aligned); others take one thread an element
// through offsets_of. out may be a itself (gradient accumulation).
#include "kernels/cuda/binary.h"

#include "kernels/cuda/elementwise.cuh"

namespace remat::kernels::cuda {
namespace {

template <BinaryOp kOp, class T>
struct Apply {
  __device__ T operator()(T x, T y) const {
    if constexpr (kOp == BinaryOp::Add) {
      return x + y;
    } else if constexpr (kOp == BinaryOp::Sub) {
      return x - y;
    } else if constexpr (kOp == BinaryOp::Mul) {
      return x * y;
    } else {
      return x / y;
    }
  }
};

template <BinaryOp kOp, class T>
void binary_op(T* out, const T* a, const T* b, const StridedArgs<2>& args, int64_t n, Stream stream) {
  const Apply<kOp, T> f;
  if (const MapShape m = map_shape(args); m.fits) {
    map_rows("binary_forward", Dst<T>{out, m.cols, 1}, m.rows, m.cols, stream, f, Src<T>{a, m.row[0], m.col[0]},
             Src<T>{b, m.row[1], m.col[1]});
    return;
  }
  launch_elementwise(n, stream, [=] __device__(int64_t i) {
    const Offsets<2> at = offsets_of(args, i);
    out[i] = f(a[at.at[0]], b[at.at[1]]);
  });
}

}  // namespace

template <class T>
void binary_forward(BinaryOp op, T* out, const T* a, const std::vector<int64_t>& a_strides, const T* b,
                    const std::vector<int64_t>& b_strides, const std::vector<int64_t>& shape, Stream stream) {
  const StridedArgs<2> args = strided_args<2>(shape, {&a_strides, &b_strides});
  const int64_t n = numel_of(shape);
  if (n == 0) return;
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
