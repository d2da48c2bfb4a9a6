// causal_softmax and attention; see attention.h.
//
// causal_softmax: one node where GPT had two (masked_fill, softmax), no mask
// tensor, and only its output saved. The GPU's kernels read only each row's
// prefix (kernels/cuda/attention.cu); the CPU's run softmax's own on rows
// masked in cache, for its bits (kernels/cpu/attention.cpp).
//
// attention: the fused kernels of kernels/flash_attention.h. The log-sum-exp
// of each query row is a side result of forward, held from forward() to
// save() as layer_norm holds its mean. A replay (Note [Recompute]) runs the
// same forward again and makes a new log-sum-exp, dropped afterwards
// (discard_side_results): the output's bits come from the online softmax's
// order of rescalings, which a one-pass replay from the saved log-sum-exp
// would not repeat.
#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "engine/autograd.h"
#include "engine/kernel_call.h"
#include "kernels/attention.h"
#if REMAT_HAVE_FLASH_ATTENTION_CUDA
#include "kernels/flash_attention.h"
#else
#include "kernels/cpu/flash_attention.h"  // the GPU's twin is not there yet
#endif

namespace remat {
namespace {

// Scores in a row: x's last axis, T.
int64_t row_length(const Shape& shape) { return shape.back(); }

// The prefix elements of all rows: T (T + 1) / 2 per (T, T) matrix; 0
// before the record has its shape (new_output() asks for traits first).
int64_t prefix_elements(const Shape& shape) {
  if (shape.size() < 2 || row_length(shape) == 0) return 0;
  const int64_t t = row_length(shape);
  return numel(shape) / t * (t + 1) / 2;
}

class CausalSoftmaxNode final : public Node {
 public:
  std::string_view name() const override { return "causal_softmax"; }

  Tensor forward(const Tensors& in) override {
    Tensor out = new_output(in, in[0].shape(), in[0].dtype());  // before dense(): that is a second reference
    const Tensor x = dense(in[0]);
    const int64_t t = row_length(x.shape());
    dispatch_floating(x.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) {
        causal_softmax_forward<T>(out.data<T>(), x.data<T>(), x.numel() / std::max<int64_t>(t, 1), t, stream);
      });
    });
    return out;
  }

  void save(const Tensors&, const Tensor& out) override { save_value(out); }

  // y = softmax(x_i0..x_ii):  dx_ij = y_ij (dy_ij - sum_{k <= i} dy_ik y_ik), 0 for j > i.
  // dx over dout when nothing else refers to it: each row's dot product is
  // read whole before any of the row is written.
  Tensors backward(const Tensor& dout_any) override {
    const bool overwrite = owns_storage_alone(dout_any);
    const Tensor dout = dense(dout_any);
    const Tensor out = saved(0);
    Tensor dx = overwrite ? dout : Tensor(dout.shape(), dout.dtype(), dout.device());
    const int64_t t = row_length(dout.shape());
    dispatch_floating(dout.dtype(), name(), [&]<class T>() {
      run_kernel(dx, name(), [&](auto stream) {
        causal_softmax_backward<T>(dx.data<T>(), dout.data<T>(), out.data<T>(), dout.numel() / std::max<int64_t>(t, 1),
                                   t, stream);
      });
    });
    return {dx};
  }

  // softmax's 5 FLOPs an element, on the prefix only (max, x - m, exp, sum,
  // scale); memory-bound. A replay may write over its input: each element
  // of x is read before that element of the output is written.
  OpTraits traits() const override {
    return {.flops = 5 * prefix_elements(record().output_shape), .overwritable_input = 0};
  }
};

// Until the GPU's fused kernels land, the op runs on the CPU alone;
// REMAT_HAVE_FLASH_ATTENTION_CUDA makes this run_kernel itself.
template <class Fn>
void run_attention_kernel(const Tensor& out, std::string_view op, Fn&& fn) {
#if REMAT_HAVE_FLASH_ATTENTION_CUDA
  run_kernel(out, op, fn);
#else
  REMAT_CHECK(out.device().type != DeviceType::CUDA, "{}: no CUDA kernel yet (output {})", op, out.str());
  run_kernel(out, op, [&](auto stream) {
    if constexpr (std::is_same_v<decltype(stream), kernels::cpu::Host>) fn(stream);
  });
#endif
}

// A (B, H, T, D) operand as the kernels read it: in place when each row's D
// elements are contiguous and rows do not overlap (a transposed view of a
// (B, T, 3C) projection), else a dense copy.
struct AttentionOperand {
  Tensor tensor;
  kernels::AttentionLayout layout;
};
AttentionOperand attention_operand(const Tensor& t) {
  const Strides& s = t.strides();
  const int64_t d = t.size(3);
  if ((s[3] == 1 || d == 1) && s[2] >= d && s[1] >= 0 && s[0] >= 0) return {t, {s[0], s[1], s[2]}};
  const Tensor copy = dense(t);
  return {copy, kernels::dense_attention_layout(t.size(1), t.size(2), d)};
}

class AttentionNode final : public Node {
 public:
  AttentionNode(bool causal, double scale) : causal_(causal), scale_(scale) {}
  std::string_view name() const override { return "attention"; }

  // Inputs q, k, v, checked by attention().
  Tensor forward(const Tensors& in) override {
    const AttentionOperand q = attention_operand(in[0]), k = attention_operand(in[1]), v = attention_operand(in[2]);
    const kernels::AttentionDims dims = dims_of(q.tensor, k.tensor);
    Tensor out({dims.batch, dims.heads, dims.q_len, dims.head_dim}, q.tensor.dtype(), q.tensor.device());
    lse_ = Tensor({dims.batch, dims.heads, dims.q_len}, q.tensor.dtype(), q.tensor.device());  // (B, Hq, Tq)
    const kernels::AttentionLayout out_layout = kernels::dense_attention_layout(dims.heads, dims.q_len, dims.head_dim);
    dispatch_floating(out.dtype(), name(), [&]<class T>() {
      run_attention_kernel(out, name(), [&](auto stream) {
        flash_attention_forward<T>(out.data<T>(), lse_.data<T>(), q.tensor.data<T>(), k.tensor.data<T>(),
                                   v.tensor.data<T>(), dims, q.layout, k.layout, v.layout, out_layout, stream);
      });
    });
    return out;
  }

  void save(const Tensors& in, const Tensor& out) override {
    for (const Tensor& t : in) save_value(t);
    save_value(out);
    save_value(lse_);
    lse_ = Tensor();
  }

  // P = exp(scale q k^T - lse), dP = dout v^T, dS = P (dP - rowsum(dout * out)):
  // dq = scale dS k,  dk = scale dS^T q,  dv = P^T dout
  Tensors backward(const Tensor& dout_any) override {
    const Tensor dout = dense(dout_any);
    const AttentionOperand q = attention_operand(saved(0)), k = attention_operand(saved(1)),
                           v = attention_operand(saved(2));
    const Tensor out = saved(3), lse = saved(4);  // dense: forward made them
    const kernels::AttentionDims dims = dims_of(q.tensor, k.tensor);
    const Tensor dq(q.tensor.shape(), q.tensor.dtype(), q.tensor.device());
    const Tensor dk(k.tensor.shape(), k.tensor.dtype(), k.tensor.device());
    const Tensor dv(v.tensor.shape(), v.tensor.dtype(), v.tensor.device());
    const kernels::AttentionLayout out_layout = kernels::dense_attention_layout(dims.heads, dims.q_len, dims.head_dim);
    dispatch_floating(dout.dtype(), name(), [&]<class T>() {
      run_attention_kernel(dq, name(), [&](auto stream) {
        flash_attention_backward<T>(dq.data<T>(), dk.data<T>(), dv.data<T>(), dout.data<T>(), q.tensor.data<T>(),
                                    k.tensor.data<T>(), v.tensor.data<T>(), out.data<T>(), lse.data<T>(), dims,
                                    q.layout, k.layout, v.layout, out_layout, stream);
      });
    });
    return {dq, dk, dv};
  }

  // Two products of 2 D FLOPs a score (q k^T, P v) and softmax's 5, over
  // the scores a query row sees: Tq (Tq + 1) / 2 a head when causal, Tq Tk
  // otherwise. Compute-bound, as matmul. A replay is forward again.
  OpTraits traits() const override {
    const Shape& out = record().output_shape;
    if (out.size() != 4) return {.compute_bound = true};  // before the record has its shapes
    const int64_t tq = out[2], tk = record().input_shapes[1][2], d = out[3];
    const int64_t scores = out[0] * out[1] * (causal_ ? tq * (tq + 1) / 2 : tq * tk);
    return {.compute_bound = true, .flops = scores * (4 * d + 5)};
  }

 private:
  kernels::AttentionDims dims_of(const Tensor& q, const Tensor& k) const {
    return {.batch = q.size(0), .heads = q.size(1), .kv_heads = k.size(1), .q_len = q.size(2), .kv_len = k.size(2),
            .head_dim = q.size(3), .causal = causal_, .scale = scale_};
  }
  void discard_side_results() override { lse_ = Tensor(); }

  bool causal_;
  double scale_;
  Tensor lse_;  // (B, Hq, Tq): from forward to save(); not kept otherwise
};

}  // namespace

Tensor causal_softmax(const Tensor& x) {
  REMAT_CHECK(x.dim() >= 2, "causal_softmax: x must be (..., T, T), got {} of {} axes", str(x.shape()), x.dim());
  REMAT_CHECK(x.size(-1) == x.size(-2), "causal_softmax: the last two axes of x must be square (T, T), got {}",
              str(x.shape()));
  REMAT_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float64, "causal_softmax: x must be float32 or float64, got {} of shape {}",
              dtype_name(x.dtype()), str(x.shape()));
  return apply_op(std::make_shared<CausalSoftmaxNode>(), {x});
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, AttentionOptions options) {
  const auto shapes = [&] { return fmt::format("q {}, k {}, v {}", str(q.shape()), str(k.shape()), str(v.shape())); };
  REMAT_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "attention: q must be (B, Hq, Tq, D), k and v (B, Hkv, Tk, D); got {}", shapes());
  REMAT_CHECK((q.dtype() == DType::Float32 || q.dtype() == DType::Float64) && k.dtype() == q.dtype() &&
                  v.dtype() == q.dtype(),
              "attention: q, k and v must be all float32 or all float64, got {}, {}, {} ({})", dtype_name(q.dtype()),
              dtype_name(k.dtype()), dtype_name(v.dtype()), shapes());
  REMAT_CHECK(k.device() == q.device() && v.device() == q.device(), "attention: q, k and v on devices {}, {}, {}",
              q.device().str(), k.device().str(), v.device().str());
  REMAT_CHECK(k.shape() == v.shape(), "attention: k and v must have one shape (B, Hkv, Tk, D), got {}", shapes());
  REMAT_CHECK(q.size(0) == k.size(0), "attention: q and k have batches {} and {} ({})", q.size(0), k.size(0),
              shapes());
  REMAT_CHECK(q.size(3) == k.size(3) && q.size(3) > 0, "attention: q and k need one head size D > 0, got {} and {} ({})",
              q.size(3), k.size(3), shapes());
  REMAT_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0,
              "attention: the kv heads ({}) must divide the query heads ({}) ({})", k.size(1), q.size(1), shapes());
  REMAT_CHECK(k.size(2) > 0, "attention: k and v have no keys ({})", shapes());
  REMAT_CHECK(!options.causal || q.size(2) == k.size(2),
              "attention: causal attention needs as many queries as keys, got Tq {} and Tk {} ({})", q.size(2),
              k.size(2), shapes());
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(3))));
  REMAT_CHECK(std::isfinite(scale), "attention: the scale must be finite, got {}", scale);
  return apply_op(std::make_shared<AttentionNode>(options.causal, scale), {q, k, v});
}

}  // namespace remat
