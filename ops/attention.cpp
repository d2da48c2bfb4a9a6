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
#include "kernels/flash_attention.h"

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

// The (B, H, T, D) heads of a packed (B, T, (Hq + 2 Hkv) D) projection,
// [q | k | v] along its last axis and each head-major, as aliases of it:
// raw views, not recorded (the node's input is the whole projection).
struct PackedHeads {
  Tensor q, k, v;
};
PackedHeads packed_heads(const Tensor& qkv, int64_t heads, int64_t kv_heads) {
  const int64_t B = qkv.size(0), T = qkv.size(1), width = qkv.size(2), D = width / (heads + 2 * kv_heads);
  const Strides& s = qkv.strides();
  const auto head = [&](int64_t first, int64_t count) {
    return qkv.alias({B, count, T, D}, {s[0], D * s[2], s[1], s[2]}, qkv.offset() + first * D * s[2]);
  };
  return {head(0, heads), head(heads, kv_heads), head(heads + kv_heads, kv_heads)};
}

// The fused attention, over q, k, v (three inputs) or over one packed
// projection (Packing: one input, whose gradient the kernels write whole,
// with no (B, T, 3C) zeros and sums of three slices' gradients).
class AttentionNode final : public Node {
 public:
  struct Packing {
    int64_t heads, kv_heads;
  };
  AttentionNode(bool causal, double scale, bool tokens_first, std::optional<Packing> packing = {})
      : causal_(causal), scale_(scale), tokens_first_(tokens_first || packing), packing_(packing) {}
  std::string_view name() const override { return "attention"; }

  // Inputs q, k, v, or qkv, checked by attention() or attention_qkv().
  Tensor forward(const Tensors& in) override {
    const Operands x = operands(in);
    Tensor out(output_shape(x.dims), x.q.tensor.dtype(), x.q.tensor.device());
    lse_ = Tensor({x.dims.batch, x.dims.heads, x.dims.q_len}, out.dtype(), out.device());  // (B, Hq, Tq)
    const kernels::AttentionLayout out_layout = output_layout(x.dims);
    dispatch_floating(out.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) {
        flash_attention_forward<T>(out.data<T>(), lse_.data<T>(), x.q.tensor.data<T>(), x.k.tensor.data<T>(),
                                   x.v.tensor.data<T>(), x.dims, x.q.layout, x.k.layout, x.v.layout, out_layout,
                                   stream);
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
  // Packed: the three written into one gradient of qkv's shape, at q's, k's
  // and v's places in it.
  Tensors backward(const Tensor& dout_any) override {
    const Tensor dout = dense(dout_any);
    const size_t inputs = packing_ ? 1 : 3;
    Tensors saved_in;
    for (size_t i = 0; i < inputs; ++i) saved_in.push_back(saved(i));
    const Operands x = operands(saved_in);
    const Tensor out = saved(inputs), lse = saved(inputs + 1);  // dense: forward made them
    Tensors grads;
    Tensor dq, dk, dv;
    kernels::AttentionGradLayouts layouts = kernels::dense_grad_layouts(x.dims);
    if (packing_) {
      const Tensor dqkv(record().input_shapes[0], dout.dtype(), dout.device());  // (B, T, (Hq + 2 Hkv) D)
      const PackedHeads d = packed_heads(dqkv, packing_->heads, packing_->kv_heads);
      dq = d.q, dk = d.k, dv = d.v;
      layouts = {attention_operand(dq).layout, attention_operand(dk).layout, attention_operand(dv).layout};
      grads = {dqkv};
    } else {
      dq = Tensor(x.q.tensor.shape(), dout.dtype(), dout.device());
      dk = Tensor(x.k.tensor.shape(), dout.dtype(), dout.device());
      dv = Tensor(x.v.tensor.shape(), dout.dtype(), dout.device());
      grads = {dq, dk, dv};
    }
    const kernels::AttentionLayout out_layout = output_layout(x.dims);
    dispatch_floating(dout.dtype(), name(), [&]<class T>() {
      run_kernel(dq, name(), [&](auto stream) {
        flash_attention_backward<T>(dq.data<T>(), dk.data<T>(), dv.data<T>(), dout.data<T>(), x.q.tensor.data<T>(),
                                    x.k.tensor.data<T>(), x.v.tensor.data<T>(), out.data<T>(), lse.data<T>(), x.dims,
                                    x.q.layout, x.k.layout, x.v.layout, out_layout, layouts, stream);
      });
    });
    return grads;
  }

  // Two products of 2 D FLOPs a score (q k^T, P v) and softmax's 5, over
  // the scores a query row sees: Tq (Tq + 1) / 2 a head when causal, Tq Tk
  // otherwise. Compute-bound, as matmul. A replay is forward again.
  OpTraits traits() const override {
    const std::vector<Shape>& in = record().input_shapes;
    int64_t batch = 0, heads = 0, tq = 0, tk = 0, d = 0;
    if (packing_ && in.size() == 1 && in[0].size() == 3) {  // qkv (B, T, (Hq + 2 Hkv) D)
      batch = in[0][0], heads = packing_->heads, tq = tk = in[0][1];
      d = in[0][2] / (packing_->heads + 2 * packing_->kv_heads);
    } else if (!packing_ && in.size() == 3 && in[0].size() == 4) {  // q (B, Hq, Tq, D), k (B, Hkv, Tk, D)
      batch = in[0][0], heads = in[0][1], tq = in[0][2], tk = in[1][2], d = in[0][3];
    } else {
      return {.compute_bound = true};  // before the record has its shapes
    }
    const int64_t scores = batch * heads * (causal_ ? tq * (tq + 1) / 2 : tq * tk);
    return {.compute_bound = true, .flops = scores * (4 * d + 5)};
  }

 private:
  struct Operands {
    AttentionOperand q, k, v;
    kernels::AttentionDims dims;
  };
  Operands operands(const Tensors& in) const {
    Operands x;
    if (packing_) {
      const PackedHeads h = packed_heads(dense(in[0]), packing_->heads, packing_->kv_heads);
      x.q = attention_operand(h.q), x.k = attention_operand(h.k), x.v = attention_operand(h.v);
    } else {
      x.q = attention_operand(in[0]), x.k = attention_operand(in[1]), x.v = attention_operand(in[2]);
    }
    const Tensor &q = x.q.tensor, &k = x.k.tensor;
    x.dims = {.batch = q.size(0), .heads = q.size(1), .kv_heads = k.size(1), .q_len = q.size(2), .kv_len = k.size(2),
              .head_dim = q.size(3), .causal = causal_, .scale = scale_};
    return x;
  }
  // (B, Hq, Tq, D), or (B, Tq, Hq, D) with tokens_first, or (B, Tq, Hq D)
  // packed; dense each.
  Shape output_shape(const kernels::AttentionDims& d) const {
    if (packing_) return {d.batch, d.q_len, d.heads * d.head_dim};
    return tokens_first_ ? Shape{d.batch, d.q_len, d.heads, d.head_dim} : Shape{d.batch, d.heads, d.q_len, d.head_dim};
  }
  kernels::AttentionLayout output_layout(const kernels::AttentionDims& d) const {
    if (!tokens_first_) return kernels::dense_attention_layout(d.heads, d.q_len, d.head_dim);
    return {.batch = d.q_len * d.heads * d.head_dim, .head = d.head_dim, .token = d.heads * d.head_dim};
  }
  void discard_side_results() override { lse_ = Tensor(); }

  bool causal_;
  double scale_;
  bool tokens_first_;  // packed: always
  std::optional<Packing> packing_;
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

namespace {

double attention_scale(const AttentionOptions& options, int64_t head_dim) {
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
  REMAT_CHECK(std::isfinite(scale), "attention: the scale must be finite, got {}", scale);
  return scale;
}

}  // namespace

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
  return apply_op(std::make_shared<AttentionNode>(options.causal, attention_scale(options, q.size(3)),
                                                 options.tokens_first),
                  {q, k, v});
}

Tensor attention_qkv(const Tensor& qkv, int64_t heads, int64_t kv_heads, AttentionOptions options) {
  REMAT_CHECK(qkv.dim() == 3, "attention_qkv: qkv must be (B, T, (Hq + 2 Hkv) D), got {}", str(qkv.shape()));
  REMAT_CHECK(qkv.dtype() == DType::Float32 || qkv.dtype() == DType::Float64,
              "attention_qkv: qkv must be float32 or float64, got {} of shape {}", dtype_name(qkv.dtype()),
              str(qkv.shape()));
  REMAT_CHECK(heads > 0 && kv_heads > 0 && heads % kv_heads == 0,
              "attention_qkv: the kv heads ({}) must divide the query heads ({}), both > 0 (qkv {})", kv_heads, heads,
              str(qkv.shape()));
  const int64_t parts = heads + 2 * kv_heads;
  REMAT_CHECK(qkv.size(2) > 0 && qkv.size(2) % parts == 0,
              "attention_qkv: qkv's last axis {} is not {} heads (Hq {} + 2 Hkv {}) of one size D > 0 (qkv {})",
              qkv.size(2), parts, heads, kv_heads, str(qkv.shape()));
  REMAT_CHECK(qkv.size(1) > 0, "attention_qkv: qkv has no tokens ({})", str(qkv.shape()));
  const double scale = attention_scale(options, qkv.size(2) / parts);
  return apply_op(std::make_shared<AttentionNode>(options.causal, scale, true,
                                                  AttentionNode::Packing{heads, kv_heads}),
                  {qkv});
}

}  // namespace remat
