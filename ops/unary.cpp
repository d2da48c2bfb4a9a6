// Unary elementwise ops; see unary.h. Each op is a small traits struct (its
// kernels and whether backward reads the input or the output) plugged into
// one node template.
#include "ops/unary.h"

#include "engine/autograd.h"
#include "engine/kernel_call.h"
#include "kernels/unary.h"
#include "ops/shape.h"

namespace remat {
namespace {

// Backward reads the output (relu, tanh, sigmoid, exp) or the input (log, gelu).
enum class Reads { Nothing, Input, Output };

struct Neg {  // d(-x)/dx = -1
  static constexpr std::string_view kName = "neg";
  static constexpr Reads kReads = Reads::Nothing;
  template <class T, class S> static void forward(T* out, const T* x, int64_t n, S s) { neg_forward(out, x, n, s); }
  template <class T, class S> static void backward(T* dx, const T* dout, const T*, int64_t n, S s) { neg_forward(dx, dout, n, s); }
};
struct Relu {  // d relu(x)/dx = [x > 0] = [relu(x) > 0]
  static constexpr std::string_view kName = "relu";
  static constexpr Reads kReads = Reads::Output;
  template <class T, class S> static void forward(T* out, const T* x, int64_t n, S s) { relu_forward(out, x, n, s); }
  template <class T, class S> static void backward(T* dx, const T* dout, const T* out, int64_t n, S s) { relu_backward(dx, dout, out, n, s); }
};
struct Tanh {  // d tanh(x)/dx = 1 - tanh(x)^2
  static constexpr std::string_view kName = "tanh";
  static constexpr Reads kReads = Reads::Output;
  template <class T, class S> static void forward(T* out, const T* x, int64_t n, S s) { tanh_forward(out, x, n, s); }
  template <class T, class S> static void backward(T* dx, const T* dout, const T* out, int64_t n, S s) { tanh_backward(dx, dout, out, n, s); }
};
struct Sigmoid {  // d s(x)/dx = s(x) (1 - s(x))
  static constexpr std::string_view kName = "sigmoid";
  static constexpr Reads kReads = Reads::Output;
  template <class T, class S> static void forward(T* out, const T* x, int64_t n, S s) { sigmoid_forward(out, x, n, s); }
  template <class T, class S> static void backward(T* dx, const T* dout, const T* out, int64_t n, S s) { sigmoid_backward(dx, dout, out, n, s); }
};
struct Exp {  // d exp(x)/dx = exp(x)
  static constexpr std::string_view kName = "exp";
  static constexpr Reads kReads = Reads::Output;
  template <class T, class S> static void forward(T* out, const T* x, int64_t n, S s) { exp_forward(out, x, n, s); }
  template <class T, class S> static void backward(T* dx, const T* dout, const T* out, int64_t n, S s) { exp_backward(dx, dout, out, n, s); }
};
struct Log {  // d log(x)/dx = 1/x
  static constexpr std::string_view kName = "log";
  static constexpr Reads kReads = Reads::Input;
  template <class T, class S> static void forward(T* out, const T* x, int64_t n, S s) { log_forward(out, x, n, s); }
  template <class T, class S> static void backward(T* dx, const T* dout, const T* x, int64_t n, S s) { log_backward(dx, dout, x, n, s); }
};

// u = sqrt(2/pi) (x + 0.044715 x^3):
// d gelu(x)/dx = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
struct Gelu {
  static constexpr std::string_view kName = "gelu";
  static constexpr Reads kReads = Reads::Input;
  static constexpr int64_t kFlops = 10;  // the cubic, the tanh, the products: about ten per element
  template <class T, class S> static void forward(T* out, const T* x, int64_t n, S s) { gelu_forward(out, x, n, s); }
  template <class T, class S> static void backward(T* dx, const T* dout, const T* x, int64_t n, S s) { gelu_backward(dx, dout, x, n, s); }
};

// FLOPs per element of a forward: Op::kFlops where given, else one.
template <class Op>
constexpr int64_t flops_per_element() {
  if constexpr (requires { Op::kFlops; }) return Op::kFlops;
  else return 1;
}

template <class Op>
class UnaryNode final : public Node {
 public:
  std::string_view name() const override { return Op::kName; }

  Tensor forward(const Tensors& in) override {
    // contiguous_copy, not contiguous(): forward must record no node of its own.
    Tensor out = new_output(in, in[0].shape(), in[0].dtype());  // before dense(): that is a second reference
    const Tensor x = dense(in[0]);
    dispatch_floating(x.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) { Op::forward(out.data<T>(), x.data<T>(), x.numel(), stream); });
    });
    return out;
  }

  void save(const Tensors& in, const Tensor& out) override {
    if constexpr (Op::kReads == Reads::Input) save_value(in[0]);
    if constexpr (Op::kReads == Reads::Output) save_value(out);
  }

  // dx goes over dout when nothing else refers to dout (the kernels are
  // elementwise: each element is read before it is written).
  Tensors backward(const Tensor& dout_any) override {
    const bool overwrite = owns_storage_alone(dout_any);
    const Tensor dout = contiguous(dout_any);
    const Tensor read = Op::kReads == Reads::Nothing ? dout : contiguous(saved(0));
    Tensor dx = overwrite ? dout : Tensor(dout.shape(), dout.dtype(), dout.device());
    dispatch_floating(dout.dtype(), name(), [&]<class T>() {
      run_kernel(dx, name(), [&](auto stream) {
        Op::backward(dx.data<T>(), dout.data<T>(), read.data<T>(), dout.numel(), stream);
      });
    });
    return {dx};
  }

  // Backward reading the input (GELU's) saves it, so a replay never holds it alone.
  OpTraits traits() const override {
    return {.flops = flops_per_element<Op>() * numel(record().output_shape),
            .overwritable_input = Op::kReads == Reads::Input ? -1 : 0};
  }
};

template <class Op>
Tensor unary(const Tensor& x) {
  return apply_op(std::make_shared<UnaryNode<Op>>(), {x});
}

}  // namespace

Tensor neg(const Tensor& x) { return unary<Neg>(x); }
Tensor relu(const Tensor& x) { return unary<Relu>(x); }
Tensor tanh(const Tensor& x) { return unary<Tanh>(x); }
Tensor sigmoid(const Tensor& x) { return unary<Sigmoid>(x); }
Tensor exp(const Tensor& x) { return unary<Exp>(x); }
Tensor log(const Tensor& x) { return unary<Log>(x); }
Tensor gelu(const Tensor& x) { return unary<Gelu>(x); }

}  // namespace remat
