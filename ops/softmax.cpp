// softmax, log_softmax, cross_entropy; see softmax.h.
#include "ops/softmax.h"

#include <cmath>
#include <limits>

#include "engine/autograd.h"
#include "engine/kernel_call.h"
#include "engine/factory.h"
#include "kernels/softmax.h"
#include "kernels/unary.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/unary.h"

namespace remat {
namespace {

// (outer, n, inner) of a dense tensor around `axis`.
struct Split {
  int64_t outer = 1, n = 1, inner = 1;
};

Split split_at(const Shape& shape, int64_t axis) {
  Split s;
  const auto a = static_cast<size_t>(axis);
  for (size_t i = 0; i < a; ++i) s.outer *= shape[i];
  for (size_t i = a + 1; i < shape.size(); ++i) s.inner *= shape[i];
  s.n = shape[a];
  return s;
}

template <bool kLog>
class SoftmaxNode final : public Node {
 public:
  explicit SoftmaxNode(int64_t axis) : axis_(axis) {}
  std::string_view name() const override { return kLog ? "log_softmax" : "softmax"; }

  Tensor forward(const Tensors& in) override {
    REMAT_CHECK(in[0].shape()[static_cast<size_t>(axis_)] > 0, "{}: axis {} of tensor {} is empty", name(), axis_,
                in[0].str());
    Tensor out = new_output(in, in[0].shape(), in[0].dtype());  // before dense(): that is a second reference
    const Tensor x = dense(in[0]);
    const Split s = split_at(x.shape(), axis_);
    dispatch_floating(x.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) {
        if constexpr (kLog) log_softmax_forward<T>(out.data<T>(), x.data<T>(), s.outer, s.n, s.inner, stream);
        else softmax_forward<T>(out.data<T>(), x.data<T>(), s.outer, s.n, s.inner, stream);
      });
    });
    return out;
  }

  void save(const Tensors&, const Tensor& out) override { save_value(out); }

  // softmax:     dx = y (dy - sum(dy y))
  // log_softmax: dx = dy - exp(y) sum(dy)
  // dx over dout when nothing else refers to it: each row is read whole
  // (its dot product with out) before any of it is written.
  Tensors backward(const Tensor& dout_any) override {
    const bool overwrite = owns_storage_alone(dout_any);
    const Tensor dout = dense(dout_any);
    const Tensor out = saved(0);
    Tensor dx = overwrite ? dout : Tensor(dout.shape(), dout.dtype(), dout.device());
    const Split s = split_at(dout.shape(), axis_);
    dispatch_floating(dout.dtype(), name(), [&]<class T>() {
      run_kernel(dx, name(), [&](auto stream) {
        if constexpr (kLog) {
          log_softmax_backward<T>(dx.data<T>(), dout.data<T>(), out.data<T>(), s.outer, s.n, s.inner, stream);
        } else {
          softmax_backward<T>(dx.data<T>(), dout.data<T>(), out.data<T>(), s.outer, s.n, s.inner, stream);
        }
      });
    });
    return {dx};
  }

  OpTraits traits() const override { return {.flops = 5 * numel(record().output_shape), .overwritable_input = 0}; }

 private:
  int64_t axis_;
};

// Note [Cross-entropy without log_probs]
// Forward keeps per row two numbers, the maximum m and log(sum exp(x - m)),
// instead of the (N, C) log-probabilities (1.65 GB at W3's 8192 x 50304, in
// float32, allocated while the logits were alive): backward reads the
// logits themselves and recomputes softmax from them in the same pass that
// writes dlogits. m and the log-sum are saved apart, not their sum, so that
// each log-probability is (x - m) - log_sum, log_softmax's own two
// subtractions: on the CPU the gradients and the loss have the bits of the
// two-buffer op this replaces (tests/ops/softmax_test.cpp holds them to it).
// Backward writes dlogits over the logits when nothing else holds their
// storage (no caller's handle, no other saved value, no retained graph):
// it lets go of its saved logits first (release_saved_now), so that the
// liveness simulator sees the logits freed and an (N, C) gradient made,
// which is what writing over them amounts to.
class CrossEntropyNode final : public Node {
 public:
  explicit CrossEntropyNode(int64_t ignore_index) : ignore_index_(ignore_index) {}
  std::string_view name() const override { return "cross_entropy"; }

  Tensor forward(const Tensors& in) override {
    const Tensor logits = dense(in[0]);
    const Tensor targets = dense(in[1]);
    REMAT_CHECK(logits.dim() == 2, "cross_entropy: logits must be (N, C), got {}", str(logits.shape()));
    REMAT_CHECK(targets.dtype() == DType::Int64, "cross_entropy: targets must be int64 class indices, got {}",
                targets.str());
    REMAT_CHECK(targets.shape() == Shape{logits.shape()[0]}, "cross_entropy: targets {} do not match logits {} "
                "(expected ({}))", str(targets.shape()), str(logits.shape()), logits.shape()[0]);
    const int64_t rows = logits.shape()[0], classes = logits.shape()[1];
    REMAT_CHECK(classes > 0, "cross_entropy: logits {} have no classes", logits.str());
    stats_ = Tensor({rows, 2}, logits.dtype(), logits.device());  // (N, 2): m, log(sum exp(x - m))
    Tensor out({}, logits.dtype(), logits.device());
    dispatch_floating(logits.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) {
        double total = 0;
        int64_t bad_row = -1;
        const bool ok = cross_entropy_forward<T>(&total, &count_, stats_.data<T>(), &bad_row, logits.data<T>(),
                                                 targets.data<int64_t>(), rows, classes, ignore_index_, stream);
        REMAT_CHECK(ok, "cross_entropy: target {} at row {} is outside [0, {}) and is not ignore_index {}",
                    targets.to_vector<int64_t>()[static_cast<size_t>(bad_row)], bad_row, classes, ignore_index_);
        const T mean = count_ > 0 ? static_cast<T>(total / static_cast<double>(count_))
                                  : std::numeric_limits<T>::quiet_NaN();
        fill(out.data<T>(), mean, int64_t{1}, stream);  // the loss, on the logits' device
      });
    });
    return out;
  }

  // The logits (input 0, or its dense copy), the row statistics and the
  // targets: Note [Cross-entropy without log_probs].
  void save(const Tensors& in, const Tensor&) override {
    save_value(dense(in[0]));
    save_value(stats_);
    save_value(dense(in[1]));
    stats_ = Tensor();
  }

  // loss = -mean_r logp[r, t_r]:  dx[r, c] = (softmax(x)[r, c] - [c == t_r]) / count
  Tensors backward(const Tensor& dout) override {
    const Tensor stats = saved(1), targets = saved(2);
    Tensor logits = saved(0);
    release_saved_now(0);  // a no-op when the graph is retained: the saved value then keeps the storage
    // Over the logits when this holds their storage alone; a thread of the
    // kernels writes only elements it has read.
    const bool overwrite = owns_storage_alone(logits);
    Tensor dlogits = overwrite ? logits : Tensor(logits.shape(), logits.dtype(), logits.device());
    dispatch_floating(logits.dtype(), name(), [&]<class T>() {
      run_kernel(dlogits, name(), [&](auto stream) {
        const T scale = count_ > 0 ? dout.item<T>() / static_cast<T>(count_) : T(0);
        cross_entropy_backward<T>(dlogits.data<T>(), logits.data<T>(), stats.data<T>(), targets.data<int64_t>(),
                                  logits.shape()[0], logits.shape()[1], ignore_index_, scale, stream);
      });
    });
    return {dlogits, Tensor()};
  }

  OpTraits traits() const override { return {.flops = 4 * numel(record().input_shapes[0])}; }

 private:
  int64_t ignore_index_;
  int64_t count_ = 0;  // rows not ignored in the last forward
  void discard_side_results() override { stats_ = Tensor(); }
  Tensor stats_;       // from forward to save(); not kept otherwise
};

}  // namespace

Tensor softmax(const Tensor& x, int64_t axis) {
  return apply_op(std::make_shared<SoftmaxNode<false>>(normalize_axis(axis, x.dim(), "softmax")), {x});
}

Tensor log_softmax(const Tensor& x, int64_t axis) {
  return apply_op(std::make_shared<SoftmaxNode<true>>(normalize_axis(axis, x.dim(), "log_softmax")), {x});
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  if (logits.dim() <= 2) return apply_op(std::make_shared<CrossEntropyNode>(ignore_index), {logits, targets});
  // (..., C) and (...): flatten to (N, C) and (N). reshape() is a view of a
  // contiguous tensor, so a language model's (B, T, V) logits are not copied;
  // the gradient flows back through the views to the original shapes.
  const Shape leading(logits.shape().begin(), logits.shape().end() - 1);
  REMAT_CHECK(targets.shape() == leading, "cross_entropy: targets {} do not match logits {} (expected {})",
              str(targets.shape()), str(logits.shape()), str(leading));
  const int64_t classes = logits.shape().back();
  return apply_op(std::make_shared<CrossEntropyNode>(ignore_index),
                  {reshape(logits, {numel(leading), classes}), reshape(targets, {numel(leading)})});
}

Tensor cross_entropy_reference(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  REMAT_CHECK(logits.dim() >= 1 && targets.dtype() == DType::Int64, "cross_entropy_reference: logits {} and "
              "targets {} (need (..., C) and int64 (...))", logits.str(), targets.str());
  const int64_t classes = logits.shape().back();
  const Tensor rows = reshape(logits, {-1, classes});
  const std::vector<int64_t> t = targets.to_vector<int64_t>();
  REMAT_CHECK(static_cast<int64_t>(t.size()) == rows.size(0), "cross_entropy_reference: {} targets for {} rows",
              t.size(), rows.size(0));
  // onehot[r, c] = 1 where c is row r's target (rows with ignore_index stay 0).
  std::vector<double> onehot(t.size() * static_cast<size_t>(classes), 0.0);
  int64_t count = 0;
  for (size_t r = 0; r < t.size(); ++r) {
    if (t[r] == ignore_index) continue;
    REMAT_CHECK(t[r] >= 0 && t[r] < classes, "cross_entropy_reference: target {} at row {} is outside [0, {})", t[r],
                r, classes);
    onehot[r * static_cast<size_t>(classes) + static_cast<size_t>(t[r])] = 1.0;
    ++count;
  }
  const Tensor mask = to(to_dtype(from_vector(onehot, {rows.size(0), classes}), logits.dtype()), logits.device());
  // -sum(onehot * log_softmax) / count
  return div(neg(sum(mul(log_softmax(rows, -1), mask))), static_cast<double>(count));
}

}  // namespace remat
