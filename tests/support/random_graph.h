// Test support: a random DAG of the ops in ops/ops.h (RandomGraph), rebuilt
// identically on every build(): the graphs of the scheduler's property tests
// (tests/scheduler/random_graph_test.cpp, milp_test.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/allocator.h"
#include "ops/ops.h"
#include "scheduler/checkpointer.h"

namespace remat::testing {

using scheduler::checkpoint;

// Under AddressSanitizer (scripts/sanitize.sh, about 10x slower, and each
// milp solve's fork copies the quarantine) the property tests take every
// 3rd of their graphs: the sanitizers look for memory errors along the code
// paths, which a third of the graphs still walk; the Release pass runs them
// all. The stride is odd, so that the tests' alternations by index (float64
// every 8th graph, chain or milp, budgets from 1 byte or from the minimum)
// all come round. The known findings have regression tests of their own.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr uint64_t kGraphStride = 3;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr uint64_t kGraphStride = 3;
#else
inline constexpr uint64_t kGraphStride = 1;
#endif
#else
inline constexpr uint64_t kGraphStride = 1;
#endif

// Graph indices 0, 1, ..., count - 1, or every kGraphStride-th of them.
inline std::vector<uint64_t> graph_indices(uint64_t count) {
  std::vector<uint64_t> out;
  for (uint64_t i = 0; i < count; i += kGraphStride) out.push_back(i);
  return out;
}

// A random DAG of ops from ops/ops.h on small shapes, rebuilt identically
// (ops, shapes, values, dropout masks) on every build(). Leaves and
// constants are made by the constructor's no-grad build and reused after,
// so that no step allocates anything that is not part of its graph.
class RandomGraph {
 public:
  RandomGraph(uint64_t seed, DType dtype) : seed_(seed), dtype_(dtype), values_(seed) {
    NoGradGuard no_grad;
    build();
  }

  Tensor build() {
    rng_.seed(seed_);
    next_leaf_ = next_constant_ = 0;
    dropout_ = Generator(seed_ ^ 0x5eed);
    blocks_ = 0;
    description_.clear();
    pool_.clear();

    const int rank = chance(0.35) ? 3 : 2;
    Shape shape;
    for (int i = 0; i < rank; ++i) shape.push_back(dim());
    const Tensor x = constant([&] { return normal(shape, 0, 1, dtype_, values_); });
    note("x{}", str(shape));
    Tensor h = first_op(x);
    remember(h);

    const int ops = 5 + pick(26);  // 5..30, the first op and the loss included
    std::optional<BlockScope> block;
    int block_left = 0;
    for (int i = 2; i < ops;) {
      if (!block && chance(0.25)) {
        block.emplace(fmt::format("block.{}", blocks_++));
        block_left = 1 + pick(6);
        note("[block.{}:", blocks_ - 1);
      }
      int done = 1;
      if (chance(0.12)) {
        const int inside = 1 + pick(4);
        note("ckpt{{");
        h = checkpoint(
            [&](const Tensors& in) {
              Tensor t = in[0];
              for (int j = 0; j < inside; ++j) t = step(t);
              return t;
            },
            {h});
        note("}}");
        done = inside;
      } else {
        h = step(h);
      }
      if (chance(0.6)) remember(h);
      i += done;
      block_left -= done;
      if (block && block_left <= 0) {
        block.reset();
        note("]");
      }
    }
    if (block) {
      block.reset();
      note("]");
    }
    Tensor loss = final_op(h);
    pool_.clear();
    return loss;
  }

  const std::vector<Tensor>& leaves() const { return leaves_; }
  const std::string& description() const { return description_; }
  void zero_grads() const {
    for (const Tensor& p : leaves_) p.set_grad(Tensor());
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  int64_t dim() { return 1 + pick(24); }

  template <class... Args>
  void note(fmt::format_string<Args...> format, Args&&... args) {
    description_ += fmt::format(format, std::forward<Args>(args)...);
    description_ += ' ';
  }

  Tensor param(const Shape& shape) {
    if (next_leaf_ == leaves_.size()) {
      const double scale = 1.0 / std::sqrt(static_cast<double>(shape.back()));
      Tensor p = normal(shape, 0, scale, dtype_, values_).requires_grad_();
      p.storage()->set_category(MemoryCategory::Parameter);
      leaves_.push_back(p);
    }
    const Tensor& p = leaves_.at(next_leaf_++);
    if (p.shape() != shape) throw std::logic_error("RandomGraph: a rebuild asked for another leaf shape");
    return p;
  }

  // The batch, targets and masks: data, as a data loader makes them.
  Tensor constant(const std::function<Tensor()>& make) {
    if (next_constant_ == constants_.size()) {
      CategoryGuard data(MemoryCategory::Data);
      constants_.push_back(make());
    }
    return constants_.at(next_constant_++);
  }

  // Earlier values of the chain: residual operands, so the graph is a DAG.
  // Only ancestors of the loss are kept, so every recorded node is in the
  // profile; some handles go early, as a caller's temporaries do.
  void remember(const Tensor& h) {
    pool_.push_back(h);
    if (pool_.size() > 6 || (pool_.size() > 1 && chance(0.2))) pool_.erase(pool_.begin() + pick(pool_.size()));
  }
  std::optional<Tensor> same_shape(const Tensor& h) {
    std::vector<Tensor> candidates;
    for (const Tensor& t : pool_) {
      if (t.shape() == h.shape() && t.impl() != h.impl()) candidates.push_back(t);
    }
    if (candidates.empty()) return std::nullopt;
    return candidates[pick(candidates.size())];
  }

  Tensor first_op(const Tensor& x) {
    const int64_t d = x.size(-1);
    switch (pick(3)) {
      case 0: {
        const int64_t out = dim();
        note("linear({}->{})", d, out);
        return linear(x, param({out, d}), chance(0.5) ? param({out}) : Tensor());
      }
      case 1:
        note("mul(param)");
        return mul(x, param(x.shape()));
      default:
        note("add(bias)");
        return add(x, param({d}));
    }
  }

  // One op drawn on h: kinds 0-15, drawn again where one does not fit h.
  Tensor step(const Tensor& h) {
    while (true) {
      if (std::optional<Tensor> out = drawn_op(pick(16), h)) return *out;
    }
  }

  std::optional<Tensor> drawn_op(int kind, const Tensor& h) {
    if (kind <= 2) return product(kind, h);
    if (kind <= 5 || kind == 12) return elementwise(kind, h);
    if (kind == 6 || kind == 7 || kind == 13) return along_axes(kind, h);
    if (kind == 8) {
      const double p = std::array{0.1, 0.25, 0.5}[pick(3)];
      note("dropout({})", p);
      return dropout(h, p, true, dropout_);
    }
    return reshaped(kind, h);
  }

  // Kinds 0-2: a linear layer, a matmul by a parameter, attention-like scores.
  Tensor product(int kind, const Tensor& h) {
    const int64_t r = h.dim();
    const int64_t d = h.size(-1);
    if (kind == 0) {
      const int64_t out = dim();
      note("linear({}->{})", d, out);
      return linear(h, param({out, d}), chance(0.5) ? param({out}) : Tensor());
    }
    if (kind == 1) {
      const int64_t out = dim();
      note("matmul({}->{})", d, out);
      return matmul(h, param({d, out}));
    }
    note("matmul(h,hT)");  // (..., n, d) @ (..., d, n)
    return mul(matmul(h, transpose(h, r - 2, r - 1)), 1.0 / std::sqrt(static_cast<double>(d)));
  }

  // Kinds 3-5 and 12: additions and products with a residual, a parameter or
  // a scalar, and the unary functions.
  Tensor elementwise(int kind, const Tensor& h) {
    const int64_t d = h.size(-1);
    switch (kind) {
      case 3: {
        if (auto other = same_shape(h)) {
          note("add(residual)");
          return add(h, *other);
        }
        note("add(bias)");
        return add(h, param({d}));
      }
      case 4: {
        if (auto other = same_shape(h); other && chance(0.5)) {
          note("mul(residual)");
          return mul(h, *other);
        }
        if (chance(0.5)) {
          note("mul(h,h)");
          return mul(h, h);
        }
        note("mul(scale)");
        return mul(h, param({d}));
      }
      case 5: {
        switch (pick(5)) {
          case 0: note("relu"); return relu(h);
          case 1: note("gelu"); return gelu(h);
          case 2: note("tanh"); return tanh(h);
          case 3: note("sigmoid"); return sigmoid(h);
          default: note("neg"); return neg(h);
        }
      }
      default: {
        switch (pick(3)) {
          case 0: note("mul(0.5)"); return mul(h, 0.5);
          case 1: note("add(1)"); return add(h, 1.0);
          default: note("1-h"); return sub(1.0, h);
        }
      }
    }
  }

  // Kinds 6, 7 and 13: softmax, layer norm, and a reduction broadcast back
  // (the graph forks and joins).
  Tensor along_axes(int kind, const Tensor& h) {
    const int64_t r = h.dim();
    const int64_t d = h.size(-1);
    if (kind == 6) {
      const int64_t axis = pick(r);
      if (chance(0.5)) {
        note("softmax({})", axis);
        return softmax(h, axis);
      }
      note("log_softmax({})", axis);
      return log_softmax(h, axis);
    }
    if (kind == 7) {
      const bool affine = chance(0.7);
      note("layer_norm{}", affine ? "" : "(plain)");
      return affine ? layer_norm(h, param({d}), param({d})) : layer_norm(h, Tensor(), Tensor());
    }
    const int64_t axis = pick(r);
    switch (pick(3)) {
      case 0: note("h-mean({})", axis); return sub(h, mean(h, {axis}, true));
      case 1: note("h*sum({})", axis); return mul(h, sum(h, {axis}, true));
      default: note("h-max({})", axis); return sub(h, max(h, axis, true));
    }
  }

  // Kinds 9-11, 14 and 15: views and copies (transpose, reshape, slice,
  // concat, contiguous) and the causal mask; nullopt where h does not fit.
  std::optional<Tensor> reshaped(int kind, const Tensor& h) {
    const int64_t r = h.dim();
    const int64_t d = h.size(-1);
    switch (kind) {
      case 9: {
        const int64_t a = pick(r), b = (a + 1 + pick(r - 1)) % r;
        note("transpose({},{})", a, b);
        return transpose(h, a, b);
      }
      case 10:
        return split_or_merge(h);
      case 11: {
        const int64_t axis = pick(r), size = h.size(axis);
        if (size < 2) return std::nullopt;
        const int64_t start = pick(size - 1), end = start + 1 + pick(size - start), step = 1 + pick(2);
        note("slice({},{}:{}:{})", axis, start, end, step);
        return slice(h, axis, start, end, step);
      }
      case 14: {
        if (d > 12) return std::nullopt;
        if (auto other = same_shape(h); other && chance(0.5)) {
          note("concat(h,residual)");
          return concat({h, *other}, r - 1);
        }
        note("concat(h,tanh(h))");
        return concat({h, tanh(h)}, r - 1);
      }
      default: {
        const int64_t n = h.size(-2);
        if (n != d) {
          note("contiguous");
          return contiguous(h);
        }
        note("masked_fill(causal)");
        return masked_fill(h, constant([&] { return causal_mask(n); }), -30.0);
      }
    }
  }

  // Split the last axis (2-D -> 3-D) or merge two (3-D -> 2-D).
  std::optional<Tensor> split_or_merge(const Tensor& h) {
    const int64_t d = h.size(-1);
    if (h.dim() == 3) {
      const Shape s = chance(0.5) ? Shape{h.size(0) * h.size(1), h.size(2)} : Shape{h.size(0), h.size(1) * h.size(2)};
      note("reshape{}", str(s));
      return reshape(h, s);
    }
    std::vector<int64_t> divisors;
    for (int64_t k = 2; k <= d; ++k) {
      if (d % k == 0) divisors.push_back(k);
    }
    if (divisors.empty()) return std::nullopt;
    const int64_t k = divisors[pick(divisors.size())];
    const Shape s{h.size(0), k, d / k};
    note("reshape{}", str(s));
    return reshape(h, s);
  }

  Tensor final_op(const Tensor& h) {
    switch (pick(4)) {
      case 0:
        note("-> sum");
        return sum(h);
      case 1:
        note("-> mean");
        return mean(h);
      case 2:
        note("-> mean(sum(0))");
        return mean(sum(h, {0}));
      default: {
        Shape rows = h.shape();
        rows.pop_back();
        const int64_t classes = h.size(-1);
        note("-> cross_entropy");
        return cross_entropy(h, constant([&] { return randint(classes, rows, values_); }));
      }
    }
  }

  uint64_t seed_;
  DType dtype_;
  Generator values_;  // leaf and constant values, drawn once
  Generator dropout_{0};
  std::mt19937_64 rng_;  // the graph's structure, drawn again on every build
  std::vector<Tensor> leaves_, constants_;
  size_t next_leaf_ = 0, next_constant_ = 0;
  int blocks_ = 0;
  std::vector<Tensor> pool_;
  std::string description_;
};

}  // namespace remat::testing
