// matmul, linear and affine; see matmul.h.
//
// Both reach BLAS through gemm_into(), which takes 2-D views as they are:
// a view whose rows or columns are unit-stride goes to GEMM with the matching
// transpose flag and leading dimension, so transpose() costs no copy. On a
// GPU with fused epilogues on, linear's bias and bias gradient go through
// gemm_epilogue_into() instead (Note [Fused epilogues]).
#include "ops/matmul.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/autograd.h"
#include "engine/kernel_call.h"
#include "kernels/gemm.h"
#include "kernels/unary.h"
#include "ops/linear_steps.h"
#include "ops/shape.h"
#include "ops/unary.h"

namespace remat {
namespace {

// How GEMM should read a 2-D view: transposed or not, and its leading dimension.
struct GemmOperand {
  bool trans = false;
  int64_t ld = 0;
  Tensor dense;  // the view itself, or a contiguous copy when GEMM cannot read it
};

GemmOperand gemm_operand(const Tensor& m) {
  const int64_t rows = m.shape()[0], cols = m.shape()[1];
  const int64_t s0 = m.strides()[0], s1 = m.strides()[1];
  if ((s1 == 1 || cols == 1) && s0 >= std::max<int64_t>(cols, 1)) return {false, s0, m};
  if ((s0 == 1 || rows == 1) && s1 >= std::max<int64_t>(rows, 1)) return {true, s1, m};
  Tensor dense = contiguous_copy(m);
  return {false, std::max<int64_t>(cols, 1), dense};
}

// BLAS takes its sizes and leading dimensions as 32-bit ints (cuBLAS's
// int): a larger one would reach GEMM truncated. Checked on every device,
// so that a shape fails alike everywhere. `operands` names the caller's
// shapes.
void check_gemm_sizes(int64_t n, int64_t k, int64_t m, const std::string& operands) {
  REMAT_CHECK(n <= INT32_MAX && k <= INT32_MAX && m <= INT32_MAX, "matmul: {}: matrices ({}, {}) @ ({}, {}) exceed "
              "BLAS's 32-bit sizes (at most {} a side)", operands, n, k, k, m, INT32_MAX);
}

// A view's leading dimension is its row (or, transposed, column) stride as
// stored, which can pass 2^31 while its own sizes are small.
void check_leading_dimension(const GemmOperand& g, const char* side, const std::string& operands) {
  REMAT_CHECK(g.ld <= INT32_MAX, "matmul: {}: the {} operand's leading dimension {} (its stride as stored) exceeds "
              "BLAS's 32-bit sizes (at most {}); make it contiguous first", operands, side, g.ld, INT32_MAX);
}

std::string operands_of(const Tensor& a, const Tensor& b) { return str(a.shape()) + " @ " + str(b.shape()); }

// a (n, k) and b (k, m) as GEMM reads them, their sizes checked.
std::pair<GemmOperand, GemmOperand> gemm_operands(const Tensor& a, const Tensor& b) {
  check_gemm_sizes(a.shape()[0], a.shape()[1], b.shape()[1], operands_of(a, b));
  std::pair<GemmOperand, GemmOperand> g{gemm_operand(a), gemm_operand(b)};
  check_leading_dimension(g.first, "left", operands_of(a, b));
  check_leading_dimension(g.second, "right", operands_of(a, b));
  return g;
}

// c (dense, n * m elements) = alpha * a (n, k) @ b (k, m) + beta * c
template <class T>
void gemm_into(const Tensor& c, const Tensor& a, const Tensor& b, T alpha, T beta) {
  const int64_t n = a.shape()[0], k = a.shape()[1], m = b.shape()[1];
  if (n == 0 || m == 0) return;
  // Named, not a structured binding: clang 14 cannot capture one in a lambda.
  const std::pair<GemmOperand, GemmOperand> operands = gemm_operands(a, b);
  const GemmOperand &ga = operands.first, &gb = operands.second;
  run_kernel(c, "matmul", [&](auto stream) {
    gemm<T>(ga.trans, gb.trans, n, m, k, alpha, ga.dense.template data<T>(), ga.ld, gb.dense.template data<T>(), gb.ld,
            beta, c.data<T>(), std::max<int64_t>(m, 1), stream);
  });
}

// Note [Fused epilogues] (kernels/cuda/gemm.h): on a CUDA tensor, with the
// flag on, linear's bias and bias gradient ride in its GEMMs' epilogues.
// Never on the CPU, which has no fused path: its graph and bits stay as
// they are whatever the flag says.
bool fused_epilogue(const Tensor& t) {
#if REMAT_HAVE_CUDA
  return t.device().type == DeviceType::CUDA && kernels::cuda::fused_epilogues();
#else
  return false;
#endif
}

// What a fused GEMM's epilogue does with `vector`: adds it (N) to every row
// of c, or writes into it the sums over k of a's rows (n) or b's columns (m).
// BiasGelu: c = gelu(a b + vector), `pre` = a b + vector (GELU's input).
enum class EpilogueKind { Bias, BiasGelu, BiasGradOfA, BiasGradOfB };

// c (dense, n * m elements) = a (n, k) @ b (k, m) with `kind`'s epilogue,
// one cuBLASLt call; GPU only (fused_epilogue() chose it).
template <class T>
void gemm_epilogue_into(const Tensor& c, const Tensor& a, const Tensor& b, EpilogueKind kind, const Tensor& vector,
                        const Tensor& pre = {}) {
  const int64_t n = a.shape()[0], k = a.shape()[1], m = b.shape()[1];
  if (n == 0 || m == 0) return;
  // Named, not a structured binding: clang 14 cannot capture one in a lambda.
  const std::pair<GemmOperand, GemmOperand> operands = gemm_operands(a, b);
  const GemmOperand &ga = operands.first, &gb = operands.second;
  run_kernel(c, "matmul", [&](auto stream) {
#if REMAT_HAVE_CUDA
    if constexpr (std::is_same_v<decltype(stream), kernels::cuda::Stream>) {
      const T* x = ga.dense.template data<T>();
      const T* y = gb.dense.template data<T>();
      const int64_t ldc = std::max<int64_t>(m, 1);
      if (kind == EpilogueKind::Bias) {
        kernels::cuda::gemm_bias<T>(ga.trans, gb.trans, n, m, k, x, ga.ld, y, gb.ld, vector.data<T>(), c.data<T>(), ldc,
                                    stream);
      } else if (kind == EpilogueKind::BiasGelu) {
        kernels::cuda::gemm_bias_gelu<T>(ga.trans, gb.trans, n, m, k, x, ga.ld, y, gb.ld, vector.data<T>(), c.data<T>(),
                                         pre.data<T>(), stream);
      } else {
        const auto of = kind == EpilogueKind::BiasGradOfA ? kernels::cuda::BiasGradOf::A : kernels::cuda::BiasGradOf::B;
        kernels::cuda::gemm_bias_grad<T>(ga.trans, gb.trans, n, m, k, x, ga.ld, y, gb.ld, c.data<T>(), ldc,
                                         vector.data<T>(), of, stream);
      }
      return;
    }
#endif
    REMAT_FAIL("matmul: a fused GEMM epilogue on {}: GPU only (Note [Fused epilogues])", c.str());
  });
}

Tensor matrix_t(const Tensor& m) { return m.alias({m.shape()[1], m.shape()[0]}, {m.strides()[1], m.strides()[0]}, m.offset()); }

void check_matmul_shapes(const Tensor& a, const Tensor& b) {
  REMAT_CHECK(a.dim() >= 2 && b.dim() >= 2, "matmul: shapes {} and {}: both operands need at least 2 axes (reshape a "
              "vector to (1, n) or (n, 1))", str(a.shape()), str(b.shape()));
  REMAT_CHECK(a.shape().back() == b.shape()[b.shape().size() - 2], "matmul: shapes {} and {} cannot be multiplied ({} "
              "!= {})", str(a.shape()), str(b.shape()), a.shape().back(), b.shape()[b.shape().size() - 2]);
  REMAT_CHECK(a.dtype() == b.dtype(), "matmul: dtypes differ: {} and {}", a.str(), b.str());
}

class MatmulNode final : public Node {
 public:
  explicit MatmulNode(double scale) : scale_(scale) {}
  std::string_view name() const override { return "matmul"; }

  Tensor forward(const Tensors& in) override {
    const Tensor& a = in[0];
    const Tensor& b = in[1];
    check_matmul_shapes(a, b);
    const int64_t n = a.shape()[a.shape().size() - 2], m = b.shape().back();
    const Shape a_batch(a.shape().begin(), a.shape().end() - 2), b_batch(b.shape().begin(), b.shape().end() - 2);
    const Shape batch = broadcast_shapes(a_batch, b_batch, "matmul");
    Shape out_shape = batch;
    out_shape.push_back(n);
    out_shape.push_back(m);
    Tensor out(out_shape, a.dtype(), a.device());
    if (b.dim() == 2 && a.is_contiguous()) {
      // (..., n, k) @ (k, m): one GEMM over all rows.
      const int64_t k = a.shape().back();
      const Tensor rows = a.alias({numel(batch) * n, k}, {k, 1}, a.offset());
      dispatch_floating(a.dtype(), name(), [&]<class T>() { gemm_into<T>(out, rows, b, T(scale_), T(0)); });
      return out;
    }
    // One GEMM per batch element, reading both operands through broadcast
    // strides. Every element's matrices share one layout, so GEMM's reading
    // of them (transpose flag, leading dimension) is settled once, on the
    // first, and an operand GEMM cannot read is made contiguous once.
    const int64_t k = a.shape().back();
    if (numel(out_shape) == 0) return out;
    check_gemm_sizes(n, k, m, operands_of(a, b));
    Shape a_full = batch, b_full = batch;
    a_full.insert(a_full.end(), a.shape().end() - 2, a.shape().end());
    b_full.insert(b_full.end(), b.shape().end() - 2, b.shape().end());
    Tensor ea = expand(a.detach(), a_full), eb = expand(b.detach(), b_full);
    const size_t nb = batch.size();
    auto first_matrix = [nb](const Tensor& t) {
      const Shape& s = t.shape();
      return t.alias({s[nb], s[nb + 1]}, {t.strides()[nb], t.strides()[nb + 1]}, t.offset());
    };
    GemmOperand ga = gemm_operand(first_matrix(ea)), gb = gemm_operand(first_matrix(eb));
    if (ga.dense.storage() != ea.storage()) ga = gemm_operand(first_matrix(ea = contiguous_copy(ea)));
    if (gb.dense.storage() != eb.storage()) gb = gemm_operand(first_matrix(eb = contiguous_copy(eb)));
    check_leading_dimension(ga, "left", operands_of(a, b));
    check_leading_dimension(gb, "right", operands_of(a, b));
    const Strides a_strides(ea.strides().begin(), ea.strides().begin() + static_cast<int64_t>(nb));
    const Strides b_strides(eb.strides().begin(), eb.strides().begin() + static_cast<int64_t>(nb));
    dispatch_floating(a.dtype(), name(), [&]<class T>() {
      run_kernel(out, name(), [&](auto stream) {
        gemm_batched<T>(ga.trans, gb.trans, n, m, k, T(scale_), ea.data<T>(), a_strides, ga.ld, eb.data<T>(), b_strides,
                        gb.ld, out.data<T>(), batch, stream);
      });
    });
    return out;
  }

  void save(const Tensors& in, const Tensor&) override {
    save_value(needs_input_grad(1) ? in[0] : Tensor());
    save_value(needs_input_grad(0) ? in[1] : Tensor());
  }

  // d(sAB)/dA = s dC B^T, d(sAB)/dB = s A^T dC (summed over broadcast batch axes)
  Tensors backward(const Tensor& dout) override {
    Tensor da, db;
    if (needs_input_grad(0)) {
      const Tensor b = saved(1);
      da = sum_to_shape(matmul(dout, transpose(b, -1, -2), scale_), record().input_shapes[0]);
    }
    if (needs_input_grad(1)) {
      const Tensor a = saved(0);
      if (a.dim() > 2 && record().input_shapes[1].size() == 2) {
        // Fold the batch into rows: dB = A_rows^T dC_rows, one GEMM.
        const int64_t k = a.shape().back(), m = dout.shape().back();
        db = matmul(transpose(reshape(a, {-1, k}), 0, 1), reshape(dout, {-1, m}), scale_);
      } else {
        db = sum_to_shape(matmul(transpose(a, -1, -2), dout, scale_), record().input_shapes[1]);
      }
    }
    return {da, db};
  }

  OpTraits traits() const override {
    return {.compute_bound = true, .flops = 2 * numel(record().output_shape) * record().input_shapes[0].back()};
  }

 private:
  double scale_;  // GEMM's alpha
};

using linear_steps::as_rows;
using linear_steps::WeightLayout;

class LinearNode final : public Node {
 public:
  explicit LinearNode(WeightLayout layout) : layout_(layout) {}
  std::string_view name() const override { return layout_ == WeightLayout::OutIn ? "linear" : "affine"; }

  Tensor forward(const Tensors& in) override {
    const Tensor& x = in[0];
    const Tensor& weight = in[1];
    const Shape out_shape = linear_steps::output_shape(name(), in, layout_);
    const bool has_bias = in.size() == 3;
    // Decided by the weight, a parameter made before any rehearsal: a step
    // rehearsed on the meta device decides as the real one.
    fused_ = linear_steps::fused_bias(weight);
    Tensor out(out_shape, x.dtype(), x.device());
    linear_steps::forward_into(out, as_rows(x), weight, has_bias ? dense(in[2]) : Tensor(), layout_, fused_);
    return out;
  }

  void save(const Tensors& in, const Tensor&) override {
    save_value(needs_input_grad(1) ? in[0] : Tensor());
    save_value(needs_input_grad(0) ? in[1] : Tensor());
  }

  // linear, y = x W^T + b:  dx = dy W,    dW = dy^T x,  db = sum over rows of dy
  // affine, y = x W + b:    dx = dy W^T,  dW = x^T dy,  db = sum over rows of dy
  // dW first: x is then read for the last time and let go before dx is
  // allocated, so that an MLP's wide hidden activation and its gradient
  // are never alive together.
  Tensors backward(const Tensor& dout_any) override {
    const Tensor dout = as_rows(dout_any);
    const int64_t out_features = dout.shape()[1];
    Tensor dx, dweight, dbias;
    // db in dW's GEMM where the bias rides in epilogues.
    const bool fuse_dbias = needs_input_grad(1) && needs_input_grad(2) && fused_;
    if (needs_input_grad(1)) {
      {
        const Tensor x = as_rows(saved(0));
        dweight = Tensor(record().input_shapes[1], dout.dtype(), dout.device());
        if (fuse_dbias) dbias = Tensor({out_features}, dout.dtype(), dout.device());
        linear_steps::weight_grad_into(dweight, dbias, x, dout, layout_, fused_);
      }
      release_saved_now(0);
    }
    if (needs_input_grad(0)) {
      dx = Tensor(record().input_shapes[0], dout.dtype(), dout.device());
      linear_steps::input_grad_into(dx, dout, saved(1), layout_);
    }
    if (needs_input_grad(2) && !fuse_dbias) {
      dbias = Tensor({out_features}, dout.dtype(), dout.device());
      linear_steps::bias_grad_into(dbias, dout);
    }
    if (record().input_shapes.size() == 3) return {dx, dweight, dbias};
    return {dx, dweight};
  }

  OpTraits traits() const override {
    return {.compute_bound = true, .flops = 2 * numel(record().output_shape) * record().input_shapes[0].back()};
  }

 private:
  WeightLayout layout_;
  bool fused_ = false;  // the bias (and its gradient) in the GEMMs' epilogues
};

// gelu(x W + b), affine's layout, as one op where fused epilogues apply
// (Note [Fused epilogues]): forward is one cublasLtMatmul
// (GELU_AUX_BIAS) writing the output and GELU's input `pre`, a side result
// kept for backward (a replay runs the same GEMM and epilogue again);
// backward takes dpre with unary_backward<Gelu>, the kernel of the gelu op, then
// dW with db in its epilogue (BGRADA) and dx. cuBLASLt's DGELU epilogue
// does not fit here: it multiplies a GEMM's own output by gelu'(aux), and
// the GEMM whose output is d(gelu output) is the next layer's dx (c_proj's
// in GPT's MLP), in another op.
class AffineGeluNode final : public Node {
 public:
  std::string_view name() const override { return "affine_gelu"; }

  Tensor forward(const Tensors& in) override {
    REMAT_CHECK(in.size() == 3, "affine_gelu: needs a bias");
    const Shape out_shape = linear_steps::output_shape(name(), in, WeightLayout::InOut);
    Tensor out(out_shape, in[0].dtype(), in[0].device());
    // A replay runs this GEMM again rather than our GELU over the saved pre:
    // cuBLASLt's GELU is ours only to float rounding, and a replay must
    // give the forward's bits (every policy bit-identical to keep-all).
    pre_ = Tensor(out_shape, out.dtype(), out.device());
    const Tensor bias = dense(in[2]);
    dispatch_floating(out.dtype(), name(), [&]<class T>() {
      gemm_epilogue_into<T>(out, as_rows(in[0]), in[1], EpilogueKind::BiasGelu, bias, pre_);
    });
    return out;
  }

  void save(const Tensors& in, const Tensor&) override {
    save_value(needs_input_grad(1) ? in[0] : Tensor());
    save_value(pre_);
    save_value(needs_input_grad(0) ? in[1] : Tensor());
    pre_ = Tensor();
  }

  // h = gelu(pre), pre = x W + b:  dpre = gelu'(pre) dh,  dW = x^T dpre,  db = sum over rows of dpre,  dx = dpre W^T
  Tensors backward(const Tensor& dh) override {
    const Tensor dout = as_rows(dh);
    Tensor dpre(dout.shape(), dout.dtype(), dout.device()), dx, dweight, dbias;
    dispatch_floating(dout.dtype(), name(), [&]<class T>() {
      {
        const Tensor pre = saved(1);
        run_kernel(dpre, name(), [&](auto stream) {
          unary_backward<kernels::Gelu>(dpre.data<T>(), dout.data<T>(), pre.data<T>(), dpre.numel(), stream);
        });
      }
      release_saved_now(1);  // pre, read for the last time
      if (needs_input_grad(1)) {
        dweight = Tensor(record().input_shapes[1], dout.dtype(), dout.device());
        if (needs_input_grad(2)) dbias = Tensor({dout.shape()[1]}, dout.dtype(), dout.device());
        const Tensor x = as_rows(saved(0));
        if (needs_input_grad(2)) gemm_epilogue_into<T>(dweight, matrix_t(x), dpre, EpilogueKind::BiasGradOfB, dbias);
        else gemm_into<T>(dweight, matrix_t(x), dpre, T(1), T(0));
      } else if (needs_input_grad(2)) {
        dbias = Tensor({dout.shape()[1]}, dout.dtype(), dout.device());
        run_kernel(dbias, name(), [&](auto stream) {
          sum_rows<T>(dbias.data<T>(), dpre.data<T>(), dpre.shape()[0], dpre.shape()[1], stream);
        });
      }
      if (needs_input_grad(0)) {
        dx = Tensor(record().input_shapes[0], dout.dtype(), dout.device());
        gemm_into<T>(dx, dpre, matrix_t(saved(2)), T(1), T(0));
      }
    });
    return {dx, dweight, dbias};
  }

  // The GEMM and GELU (about 8 per element, as the gelu op counts); a
  // replay is all of it again (forward above).
  OpTraits traits() const override {
    const int64_t out = numel(record().output_shape);
    return {.compute_bound = true, .flops = 2 * out * record().input_shapes[0].back() + 8 * out};
  }

 private:
  void discard_side_results() override { pre_ = Tensor(); }
  Tensor pre_;  // (..., out): from forward to save(); not kept otherwise
};

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, double scale) {
  REMAT_CHECK(std::isfinite(scale), "matmul: shapes {} and {}: scale {} is not finite", str(a.shape()), str(b.shape()),
              scale);
  return apply_op(std::make_shared<MatmulNode>(scale), {a, b});
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  auto node = std::make_shared<LinearNode>(WeightLayout::OutIn);
  if (bias.defined()) return apply_op(std::move(node), {x, weight, bias});
  return apply_op(std::move(node), {x, weight});
}

bool fused_epilogues_apply(const Tensor& weight) { return fused_epilogue(weight); }

Tensor affine_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!bias.defined() || !fused_epilogue(weight)) return gelu(affine(x, weight, bias));
  return apply_op(std::make_shared<AffineGeluNode>(), {x, weight, bias});
}

Tensor affine(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  auto node = std::make_shared<LinearNode>(WeightLayout::InOut);
  if (bias.defined()) return apply_op(std::move(node), {x, weight, bias});
  return apply_op(std::move(node), {x, weight});
}


namespace linear_steps {

Tensor as_rows(const Tensor& x) {
  const Tensor rows = dense(x);
  const Shape& shape = x.shape();
  const int64_t f = shape.back();
  return rows.alias({numel(Shape(shape.begin(), shape.end() - 1)), f}, {f, 1}, rows.offset());
}

Shape output_shape(std::string_view op, const Tensors& in, WeightLayout layout) {
  const Tensor& x = in[0];
  const Tensor& weight = in[1];
  const size_t in_axis = layout == WeightLayout::OutIn ? 1 : 0;
  REMAT_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.shape().back() == weight.shape()[in_axis], "{}: input {} does "
              "not fit weight {} (expected input (..., {}))", op, str(x.shape()), str(weight.shape()),
              weight.dim() == 2 ? weight.shape()[in_axis] : -1);
  REMAT_CHECK(x.dtype() == weight.dtype(), "{}: dtypes differ: input {} and weight {}", op, x.str(), weight.str());
  const int64_t out_features = weight.shape()[1 - in_axis];
  if (in.size() == 3) {
    REMAT_CHECK(in[2].shape() == Shape{out_features} && in[2].dtype() == x.dtype(), "{}: bias {} does not fit "
                "weight {} (expected ({}))", op, in[2].str(), str(weight.shape()), out_features);
  }
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  return out_shape;
}

bool fused_bias(const Tensor& weight) { return fused_epilogue(weight); }

void forward_into(const Tensor& out, const Tensor& rows, const Tensor& weight, const Tensor& bias, WeightLayout layout,
                  bool fused) {
  // (in, out) as GEMM's right operand: W^T for linear, W for affine.
  const Tensor w_in_out = layout == WeightLayout::OutIn ? matrix_t(weight) : weight;
  const bool has_bias = bias.defined();
  dispatch_floating(out.dtype(), "linear", [&]<class T>() {
    if (has_bias && fused) {
      gemm_epilogue_into<T>(out, rows, w_in_out, EpilogueKind::Bias, bias);
      return;
    }
    if (has_bias) {
      run_kernel(out, "linear", [&](auto stream) {
        repeat_rows<T>(out.data<T>(), bias.data<T>(), rows.shape()[0], w_in_out.shape()[1], stream);
      });
    }
    gemm_into<T>(out, rows, w_in_out, T(1), has_bias ? T(1) : T(0));
  });
}

// db in dW's GEMM: the sums over rows of dout, its left operand's rows for
// linear (dout^T x), its right operand's columns for affine (x^T dout).
void weight_grad_into(const Tensor& dweight, const Tensor& dbias, const Tensor& rows, const Tensor& dout,
                      WeightLayout layout, bool fused) {
  const bool out_in = layout == WeightLayout::OutIn;
  dispatch_floating(dout.dtype(), "linear", [&]<class T>() {
    if (dbias.defined()) {
      REMAT_CHECK(fused, "linear: a bias gradient in dW's GEMM needs fused epilogues (weight gradient {})",
                  dweight.str());
      if (out_in) gemm_epilogue_into<T>(dweight, matrix_t(dout), rows, EpilogueKind::BiasGradOfA, dbias);
      else gemm_epilogue_into<T>(dweight, matrix_t(rows), dout, EpilogueKind::BiasGradOfB, dbias);
    } else if (out_in) {
      gemm_into<T>(dweight, matrix_t(dout), rows, T(1), T(0));
    } else {
      gemm_into<T>(dweight, matrix_t(rows), dout, T(1), T(0));
    }
  });
}

void input_grad_into(const Tensor& dx, const Tensor& dout, const Tensor& weight, WeightLayout layout) {
  dispatch_floating(dout.dtype(), "linear", [&]<class T>() {
    gemm_into<T>(dx, dout, layout == WeightLayout::OutIn ? weight : matrix_t(weight), T(1), T(0));
  });
}

void bias_grad_into(const Tensor& dbias, const Tensor& dout) {
  dispatch_floating(dout.dtype(), "linear", [&]<class T>() {
    run_kernel(dbias, "linear", [&](auto stream) {
      sum_rows<T>(dbias.data<T>(), dout.data<T>(), dout.shape()[0], dout.shape()[1], stream);
    });
  });
}

}  // namespace linear_steps

}  // namespace remat
