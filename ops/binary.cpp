// add, sub, mul, div; see binary.h. One node class covers the four: they
// share broadcasting and differ in one line of forward and of backward.
#include "ops/binary.h"

#include "engine/autograd.h"
#include "engine/factory.h"
#include "engine/kernel_call.h"
#include "kernels/binary.h"
#include "ops/shape.h"
#include "ops/unary.h"

namespace remat {
namespace {

using kernels::BinaryOp;

std::string_view op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
  }
  return "?";
}

// x's strides seen from `shape` (x broadcast to it): 0 on broadcast axes.
Strides broadcast_strides(const Tensor& x, const Shape& shape) {
  Strides strides(shape.size(), 0);
  const size_t lead = shape.size() - x.shape().size();
  for (size_t i = 0; i < x.shape().size(); ++i) {
    strides[lead + i] = x.shape()[i] == 1 ? 0 : x.strides()[i];
  }
  return strides;
}

class BinaryNode final : public Node {
 public:
  explicit BinaryNode(BinaryOp op) : op_(op) {}
  std::string_view name() const override { return op_name(op_); }

  Tensor forward(const Tensors& in) override {
    const Tensor& a = in[0];
    const Tensor& b = in[1];
    REMAT_CHECK(a.dtype() == b.dtype(), "{}: dtypes differ: {} and {}; convert one with to_dtype()", name(), a.str(),
                b.str());
    const Shape shape = broadcast_shapes(a.shape(), b.shape(), name());
    Tensor out = new_output(in, shape, a.dtype());
    dispatch_floating(a.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) {
        binary_forward<T>(op_, out.data<T>(), a.data<T>(), broadcast_strides(a, shape), b.data<T>(),
                          broadcast_strides(b, shape), shape, stream);
      });
    });
    return out;
  }

  void save(const Tensors& in, const Tensor& out) override {
    // add and sub read nothing; mul reads the other operand; div reads b
    // for both gradients and a for db.
    const bool mul_or_div = op_ == BinaryOp::Mul || op_ == BinaryOp::Div;
    const bool b_read = (op_ == BinaryOp::Mul && needs_input_grad(0)) || op_ == BinaryOp::Div;
    save_value(mul_or_div && needs_input_grad(1) ? in[0] : Tensor());
    save_value(b_read ? in[1] : Tensor());
  }

  Tensors backward(const Tensor& dout) override {
    const Shape& a_shape = record().input_shapes[0];
    const Shape& b_shape = record().input_shapes[1];
    Tensor da, db;
    switch (op_) {
      case BinaryOp::Add:  // d(a+b)/da = 1, d(a+b)/db = 1
        da = dout;
        db = dout;
        break;
      case BinaryOp::Sub:  // d(a-b)/da = 1, d(a-b)/db = -1
        da = dout;
        if (needs_input_grad(1)) db = neg(dout);
        break;
      case BinaryOp::Mul:  // d(a*b)/da = b, d(a*b)/db = a
        if (needs_input_grad(0)) da = mul(dout, saved(1));
        if (needs_input_grad(1)) db = mul(dout, saved(0));
        break;
      case BinaryOp::Div:  // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2
        if (needs_input_grad(0)) da = div(dout, saved(1));
        if (needs_input_grad(1)) {
          const Tensor b = saved(1);
          db = neg(div(mul(dout, saved(0)), mul(b, b)));
        }
        break;
    }
    if (!needs_input_grad(0)) da = Tensor();
    if (!needs_input_grad(1)) db = Tensor();
    if (da.defined()) da = sum_to_shape(da, a_shape);
    if (db.defined()) db = sum_to_shape(db, b_shape);
    return {da, db};
  }

  OpTraits traits() const override { return {.flops = numel(record().output_shape), .overwritable_input = 0}; }

 private:
  BinaryOp op_;
};

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) { return apply_op(std::make_shared<BinaryNode>(op), {a, b}); }

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Div, a, b); }

namespace {
// A 0-d tensor holding `value` on t's device (a CPU scalar would fail
// apply_op's same-device check for a CUDA t).
Tensor scalar_like(double value, const Tensor& t) { return full({}, value, t.dtype(), t.device()); }
}  // namespace

Tensor add(const Tensor& a, double b) { return add(a, scalar_like(b, a)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(b, a)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(b, a)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(b, a)); }
Tensor sub(double a, const Tensor& b) { return sub(scalar_like(a, b), b); }
Tensor div(double a, const Tensor& b) { return div(scalar_like(a, b), b); }

}  // namespace remat
