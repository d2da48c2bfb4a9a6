// dropout: the mask is the one the spec defines from Philox at (seed,
// offset), kept values are scaled exactly, the same seed gives the same mask
// at any thread count, backward and replay draw the forward mask again, and
// the node saves no bytes.
#include "ops/dropout.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/allocator.h"
#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/gradcheck.h"
#include "tests/support/thread_counts.h"

namespace remat {
namespace {

using testing::contains;
using testing::error_of;
using testing::random_leaf;

// Element i of a call that reserved counters from `offset`.
bool kept_by_spec(uint64_t seed, uint64_t offset, int64_t i, double p) {
  const std::array<uint32_t, 4> words = philox4x32(seed, offset + static_cast<uint64_t>(i / 4));
  return uniform_float(words[static_cast<size_t>(i % 4)]) >= p;
}

TEST(Dropout, MaskIsPhiloxAtSeedAndOffset) {
  // 10 elements take ceil(10 / 4) = 3 counters: the first call reads 0..2,
  // the second 3..5.
  Generator generator(77);
  std::vector<double> values(10);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i) + 1;  // nonzero
  const Tensor x = from_vector(values, {2, 5});
  const double p = 0.5;
  for (uint64_t offset : {0u, 3u}) {
    const std::vector<double> y = dropout(x, p, true, generator).to_vector<double>();
    int kept = 0;
    for (int64_t i = 0; i < 10; ++i) {
      const double expected = kept_by_spec(77, offset, i, p) ? 2 * values[static_cast<size_t>(i)] : 0.0;
      EXPECT_EQ(y[static_cast<size_t>(i)], expected) << "offset " << offset << " element " << i;
      kept += y[static_cast<size_t>(i)] != 0;
    }
    EXPECT_GT(kept, 0);
    EXPECT_LT(kept, 10);
  }
  EXPECT_EQ(generator.offset(), 6u);
}

TEST(Dropout, FractionKeptAndExactScale) {
  const int64_t n = 1 << 20;
  for (double p : {0.1, 0.3, 0.75}) {
    Generator generator(5);
    const Tensor x = uniform({n}, 1, 2, DType::Float32, generator);  // never 0
    const std::vector<float> in = x.to_vector<float>();
    const uint64_t offset = generator.offset();
    const std::vector<float> out = dropout(x, p, true, generator).to_vector<float>();
    const float scale = static_cast<float>(1.0 / (1.0 - p));
    int64_t kept = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      // The threaded path draws the mask the spec defines, element by element.
      ASSERT_EQ(out[i] != 0.0f, kept_by_spec(5, offset, static_cast<int64_t>(i), p)) << "p " << p << " element " << i;
      if (out[i] == 0.0f) continue;
      ++kept;
      ASSERT_EQ(out[i], in[i] * scale) << "p " << p << " element " << i;
    }
    // The kept count is binomial(n, 1 - p): its sd is below 0.0005 n.
    EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(n), 1 - p, 0.003) << "p " << p;
  }
}

TEST(Dropout, SameSeedSameMaskConsecutiveCallsDiffer) {
  const Tensor x = ones({1000}, DType::Float64);
  Generator a(11), b(11);
  const std::vector<double> first = dropout(x, 0.5, true, a).to_vector<double>();
  EXPECT_EQ(first, dropout(x, 0.5, true, b).to_vector<double>());
  const std::vector<double> second = dropout(x, 0.5, true, a).to_vector<double>();
  EXPECT_NE(first, second);
  EXPECT_EQ(second, dropout(x, 0.5, true, b).to_vector<double>());
  Generator c(12);
  EXPECT_NE(first, dropout(x, 0.5, true, c).to_vector<double>());
  // The default generator is used when none is given, and manual_seed resets it.
  manual_seed(3);
  const std::vector<double> d1 = dropout(x, 0.5).to_vector<double>();
  manual_seed(3);
  EXPECT_EQ(d1, dropout(x, 0.5).to_vector<double>());
}

TEST(Dropout, BackwardMaskEqualsForwardMask) {
  Generator generator(21);
  Tensor x = uniform({3000}, -1, 1, DType::Float64, generator);
  x.requires_grad_();
  const Tensor out = dropout(x, 0.5, true, generator);
  const Tensor dout = uniform({3000}, -1, 1, DType::Float64, generator);
  out.backward(dout);
  // dx = dout * keep * 2 = dout * out / x (exact with scale 2).
  const std::vector<double> xs = x.to_vector<double>(), ys = out.to_vector<double>();
  const std::vector<double> gs = dout.to_vector<double>(), dx = x.grad().to_vector<double>();
  int zeros_seen = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_NE(xs[i], 0.0);
    ASSERT_EQ(dx[i], gs[i] * (ys[i] / xs[i])) << i;
    zeros_seen += ys[i] == 0;
  }
  EXPECT_GT(zeros_seen, 0);
}

TEST(Dropout, ReplayIsBitIdentical) {
  // forward() again from the recorded (seed, offset), after the generator
  // has moved on, gives the same bits: what recompute relies on.
  Generator generator(8);
  Tensor x = normal({5, 1001}, 0, 1, DType::Float32, generator);
  x.requires_grad_();
  const Tensor out = dropout(x, 0.2, true, generator);
  (void)dropout(x, 0.2, true, generator);
  ASSERT_NE(out.grad_fn(), nullptr);
  const Tensor replay = out.grad_fn()->forward({x.detach()});
  EXPECT_EQ(replay.to_vector<float>(), out.to_vector<float>());
}

TEST(Dropout, SavesNoBytes) {
  // Activation bytes after forward grow by the output alone: no mask, no input copy.
  Generator generator(2);
  Tensor x = normal({256, 512}, 0, 1, DType::Float32, generator);
  x.requires_grad_();
  const int64_t before = cpu_allocator().stats().live_of(MemoryCategory::Activation);
  const Tensor out = dropout(x, 0.1, true, generator);
  const int64_t after = cpu_allocator().stats().live_of(MemoryCategory::Activation);
  EXPECT_EQ(after - before, static_cast<int64_t>(out.nbytes()));
}

TEST(Dropout, Gradients) {
  // A fresh generator with the same seed inside f: every call of f draws the
  // same mask, so finite differences see a fixed linear map.
  EXPECT_GRADIENTS_MATCH(
      [](const Tensors& x) {
        Generator generator(99);
        return dropout(x[0], 0.3, true, generator);
      },
      (Tensors{random_leaf({4, 7})}));
  EXPECT_GRADIENTS_MATCH(
      [](const Tensors& x) {
        Generator generator(4);
        return dropout(transpose(x[0], 0, 1), 0.6, true, generator);
      },
      (Tensors{random_leaf({3, 5}, -1, 1, 6)}));
}

TEST(Dropout, EvalModeAndZeroPReturnX) {
  Generator generator(1);
  Tensor x = random_leaf({3, 4});
  const uint64_t offset = generator.offset();
  const Tensor eval = dropout(x, 0.5, false, generator);
  EXPECT_EQ(eval.impl(), x.impl());
  const Tensor zero_p = dropout(x, 0.0, true, generator);
  EXPECT_EQ(zero_p.impl(), x.impl());
  EXPECT_EQ(generator.offset(), offset);  // nothing drawn
}

TEST(Dropout, POutsideRangeIsAnError) {
  const Tensor x = ones({4});
  for (double p : {1.0, -0.1, 1.5}) {
    const std::string message = error_of([&] { dropout(x, p); });
    EXPECT_TRUE(contains(message, fmt::format("p = {}", p))) << message;
  }
  EXPECT_THROW(dropout(x, 1.0, false), Error);
}

// The mask, the values and the gradient at 1, 2 and 3 threads bit for bit:
// 300001 elements, split in groups of four (one Philox call each).
TEST(Dropout, BitsDoNotDependOnTheThreadCount) {
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    Generator values(67);
    const Tensor x = uniform({300001}, -1, 1, dtype, values), dy = uniform({300001}, -1, 1, dtype, values);
    testing::expect_bits_independent_of_threads("dropout " + std::string(dtype_name(dtype)), [&] {
      Generator g(68);
      Tensor leaf = x.detach().requires_grad_();
      const Tensor y = dropout(leaf, 0.25, true, g);
      sum(y * dy).backward();
      return Tensors{y, leaf.grad()};
    });
  }
}

}  // namespace
}  // namespace remat
