// Every op on the GPU against the same op on the CPU, forward and backward
// through autograd (label cuda; skipped, with a message, where no GPU is
// present or the build has no CUDA), on shapes with broadcasting, strided
// views and odd sizes that span many blocks (more than 256 rows for the
// row kernels, rows of 1024 and more for the block-per-row ones); then the
// GPU's error paths and the cases a random input does not reach (k == 0 over
// recycled memory, NaN in max, float masks).
//
// Values agree when |gpu - cpu| <= rtol |cpu| + atol, rtol 1e-5 for float32
// and 1e-12 for float64. atol is a floor for values near 0: 1e-6 (float32)
// and 1e-14 (float64), except in cases whose values are long sums that may
// cancel (GEMM, sums over many elements, the column sums of a gradient): the
// error of a sum is relative to the sum of its terms' magnitudes, not to its
// result, so those cases state an atol from their terms (OpCase::atol). A NaN
// on the CPU must be a NaN on the GPU.
#include <gtest/gtest.h>

#if REMAT_HAVE_CUDA

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tests/support/errors.h"
#include "tests/support/gpu.h"

namespace remat {
namespace {

using testing::contains;
using testing::error_of;

using test::kGpu;

struct Tolerance {
  double rtol;
  double atol;
};

// `terms`: the most terms any output or gradient of the case sums.
Tolerance tolerance_for(DType dtype, int64_t terms) {
  const double eps = dtype == DType::Float32 ? std::numeric_limits<float>::epsilon()
                                             : std::numeric_limits<double>::epsilon();
  const double floor = dtype == DType::Float32 ? 1e-6 : 1e-14;
  return {dtype == DType::Float32 ? 1e-5 : 1e-12, std::max(floor, eps * static_cast<double>(terms))};
}

// An op case: float inputs (gradients checked for each), int64 inputs
// (ids, targets, masks) and the function of both.
struct OpCase {
  std::string name;
  std::vector<Shape> shapes;
  std::function<Tensor(const Tensors& floats, const Tensors& ints)> f;
  std::vector<Tensor> ints = {};
  double low = -2, high = 2;
  int64_t terms = 1;  // the longest sum in an output or a gradient (see the top of the file)
  std::function<void(const Tensor&)> edit = {};  // changes the first float input (on the CPU) before both devices see it
};

// The first element outside the rule at the top of the file, as one failure.
void expect_within(const Tensor& gpu, const Tensor& cpu, Tolerance tolerance, const std::string& what) {
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  ASSERT_EQ(gpu.device(), kGpu) << what;
  const std::vector<double> g = gpu.to_vector<double>(), c = cpu.to_vector<double>();
  for (size_t i = 0; i < c.size(); ++i) {
    if (std::isnan(c[i])) {
      ASSERT_TRUE(std::isnan(g[i])) << what << " at " << i << ": got " << g[i] << ", the CPU has NaN";
      continue;
    }
    ASSERT_LE(std::abs(g[i] - c[i]), tolerance.rtol * std::abs(c[i]) + tolerance.atol)
        << what << " at " << i << ": got " << g[i] << ", the CPU has " << c[i];
  }
}

void check_op(const OpCase& c, DType dtype) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)));
  const Tolerance tolerance = tolerance_for(dtype, c.terms);
  Generator g(17);
  Tensors cpu_in, gpu_in, cpu_ints, gpu_ints;
  for (const Shape& shape : c.shapes) {
    Tensor x = uniform(shape, c.low, c.high, dtype, g);
    if (c.edit && cpu_in.empty()) c.edit(x);
    cpu_in.push_back(x.requires_grad_());
    gpu_in.push_back(to(x.detach(), kGpu).requires_grad_());
  }
  for (const Tensor& i : c.ints) {
    cpu_ints.push_back(i);
    gpu_ints.push_back(to(i, kGpu));
  }
  const Tensor cpu_out = c.f(cpu_in, cpu_ints), gpu_out = c.f(gpu_in, gpu_ints);
  expect_within(gpu_out, cpu_out, tolerance, "forward");
  const Tensor weights = uniform(cpu_out.shape(), -1, 1, dtype, g);  // a loss that weighs every output
  sum(mul(cpu_out, weights)).backward();
  sum(mul(gpu_out, to(weights, kGpu))).backward();
  for (size_t i = 0; i < cpu_in.size(); ++i) {
    ASSERT_TRUE(gpu_in[i].grad().defined()) << "input " << i;
    expect_within(gpu_in[i].grad(), cpu_in[i].grad(), tolerance, "gradient of input " + std::to_string(i));
  }
}

// `n` int64 values uniform in [0, high), every tenth `ignored` when it is set.
Tensor random_ints(int64_t n, int64_t high, uint64_t seed, const Shape& shape, bool with_ignored = false) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> values(static_cast<size_t>(n));
  for (int64_t& v : values) {
    v = with_ignored && rng() % 10 == 0 ? -100 : static_cast<int64_t>(rng() % static_cast<uint64_t>(high));
  }
  return from_vector(values, shape);
}

// NaN at every 97th element of x, and twice in its rows 3 and 5 (max keeps
// the first NaN, its gradient goes there).
void plant_nans(const Tensor& x) {
  const int64_t n = x.numel(), cols = x.shape().back();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto set = [&](int64_t i) {
    if (x.dtype() == DType::Float32) {
      x.data<float>()[i] = static_cast<float>(nan);
    } else {
      x.data<double>()[i] = nan;
    }
  };
  for (int64_t i = 0; i < n; i += 97) set(i);
  for (const int64_t row : {3, 5}) {
    set(row * cols + cols / 3);
    set(row * cols + cols - 2);
  }
}

// A (rows, cols) int64 pattern, nonzero where (i + 2j) % 3 == 0.
Tensor mask_pattern(int64_t rows, int64_t cols) {
  std::vector<int64_t> values(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) values[static_cast<size_t>(i * cols + j)] = (i + 2 * j) % 3 == 0 ? 1 : 0;
  }
  return from_vector(values, {rows, cols});
}

// 300 x 257 = 77,100 elements: 302 blocks of 256 threads.
const Shape kMatrix{300, 257};

// One thread an element: binary with broadcasting, masks, gathers, copies
// (the unary ops: CudaUnary below).
std::vector<OpCase> elementwise_cases() {
  const Tensor ids = random_ints(300, 500, 1, {3, 100});  // repeated ids in a (500, 64) table
  return {
      // The (24, 1) operand's gradient sums 16 x 257 terms; div's (257) one, 300.
      {"add broadcast", {{16, 1, 257}, {24, 1}}, [](const Tensors& x, const Tensors&) { return add(x[0], x[1]); },
       {}, -2, 2, 16 * 257},
      {"sub", {kMatrix, kMatrix}, [](const Tensors& x, const Tensors&) { return sub(x[0], x[1]); }},
      {"mul transposed", {{257, 300}, kMatrix},
       [](const Tensors& x, const Tensors&) { return mul(transpose(x[0], 0, 1), x[1]); }},
      {"div broadcast", {kMatrix, {257}}, [](const Tensors& x, const Tensors&) { return div(x[0], add(x[1], 3.0)); },
       {}, 0.5, 2, 300},
      {"embedding", {{500, 64}}, [](const Tensors& x, const Tensors& i) { return embedding(x[0], i[0]); }, {ids}},
      {"masked_fill causal", {{4, 60, 60}},
       [](const Tensors& x, const Tensors&) { return masked_fill(x[0], causal_mask(60, x[0].device()), -1e4); }},
      {"masked_fill float mask broadcast over rows", {kMatrix},
       [](const Tensors& x, const Tensors& i) { return masked_fill(x[0], to_dtype(i[0], x[0].dtype()), -3.5); },
       {mask_pattern(1, 257)}},
      {"masked_fill float mask", {kMatrix},
       [](const Tensors& x, const Tensors& i) { return masked_fill(x[0], to_dtype(i[0], x[0].dtype()), 7.0); },
       {mask_pattern(300, 257)}},
      {"concat slice", {{300, 40}, {300, 20}},
       [](const Tensors& x, const Tensors&) { return slice(concat({x[0], x[1]}, 1), 1, 1, 59, 2); }},
      {"contiguous permute", {{20, 30, 40}},
       [](const Tensors& x, const Tensors&) { return contiguous(permute(x[0], {2, 0, 1})); }},
  };
}

// Sums and maxima over outer, inner and middle axes.
std::vector<OpCase> reduction_cases() {
  return {
      {"sum over outer and inner axes", {{30, 40, 50}}, [](const Tensors& x, const Tensors&) { return sum(x[0], {0, 2}); },
       {}, -2, 2, 30 * 50},
      {"sum over rows (a bias gradient)", {{600, 300}}, [](const Tensors& x, const Tensors&) { return sum(x[0], {0}); },
       {}, -2, 2, 600},
      {"mean", {{30, 40, 50}}, [](const Tensors& x, const Tensors&) { return mean(x[0], {1}); }, {}, -2, 2, 40},
      {"max over the last axis", {kMatrix}, [](const Tensors& x, const Tensors&) { return max(x[0], -1); }},
      {"max over a middle axis", {{30, 70, 20}}, [](const Tensors& x, const Tensors&) { return max(x[0], 1); }},
      {"max with NaN", {kMatrix}, [](const Tensors& x, const Tensors&) { return max(x[0], -1); }, {}, -2, 2, 1,
       plant_nans},
      {"max with NaN over the first axis", {kMatrix}, [](const Tensors& x, const Tensors&) { return max(x[0], 0); }, {},
       -2, 2, 1, plant_nans},
  };
}

// A warp or a block per row: softmax, log_softmax, cross-entropy, layer norm.
std::vector<OpCase> row_cases() {
  const Tensor targets = random_ints(300, 50, 2, {300}, true);  // some ignored
  const Tensor long_targets = random_ints(8, 1500, 3, {8}, true);
  return {
      {"softmax", {{300, 100}}, [](const Tensors& x, const Tensors&) { return softmax(x[0], -1); }, {}, -2, 2, 100},
      {"softmax long rows", {{6, 3000}}, [](const Tensors& x, const Tensors&) { return softmax(x[0], -1); }, {}, -2, 2,
       3000},
      {"softmax middle axis", {{3, 90, 40}}, [](const Tensors& x, const Tensors&) { return softmax(x[0], 1); }, {}, -2,
       2, 90},
      {"log_softmax", {{300, 100}}, [](const Tensors& x, const Tensors&) { return log_softmax(x[0], -1); }, {}, -2, 2,
       100},
      {"log_softmax long rows", {{4, 2000}}, [](const Tensors& x, const Tensors&) { return log_softmax(x[0], -1); }, {},
       -2, 2, 2000},
      {"cross_entropy", {{300, 50}}, [](const Tensors& x, const Tensors& i) { return cross_entropy(x[0], i[0]); },
       {targets}, -2, 2, 300},
      {"cross_entropy long rows", {{8, 1500}},
       [](const Tensors& x, const Tensors& i) { return cross_entropy(x[0], i[0]); }, {long_targets}, -2, 2, 1500},
      // dweight and dbias: sums over 300 rows.
      {"layer_norm", {{300, 130}, {130}, {130}},
       [](const Tensors& x, const Tensors&) { return layer_norm(x[0], x[1], x[2]); }, {}, -2, 2, 300},
      {"layer_norm without weight or bias", {{300, 130}},
       [](const Tensors& x, const Tensors&) { return layer_norm(x[0], Tensor(), Tensor()); }, {}, -2, 2, 130},
      {"layer_norm with weight only", {{300, 130}, {130}},
       [](const Tensors& x, const Tensors&) { return layer_norm(x[0], x[1], Tensor()); }, {}, -2, 2, 300},
  };
}

// cuBLAS: matmul (one GEMM over rows, and batched), linear, affine.
std::vector<OpCase> gemm_cases() {
  return {
      // GEMM: sums of 70 products (forward), 257 and 300 (gradients).
      {"matmul", {{300, 70}, {70, 257}}, [](const Tensors& x, const Tensors&) { return matmul(x[0], x[1], 0.5); }, {},
       -2, 2, 300},
      {"matmul batched broadcast", {{2, 3, 40, 50}, {3, 50, 60}},
       [](const Tensors& x, const Tensors&) { return matmul(x[0], x[1]); }, {}, -2, 2, 2 * 40},
      {"matmul transposed", {{70, 300}, {257, 70}},
       [](const Tensors& x, const Tensors&) { return matmul(transpose(x[0], 0, 1), transpose(x[1], 0, 1)); }, {}, -2,
       2, 300},
      {"linear", {{2, 150, 70}, {90, 70}, {90}},
       [](const Tensors& x, const Tensors&) { return linear(x[0], x[1], x[2]); }, {}, -2, 2, 300},
      {"affine", {{300, 70}, {70, 90}, {90}},
       [](const Tensors& x, const Tensors&) { return affine(x[0], x[1], x[2]); }, {}, -2, 2, 300},
  };
}

void check_all(const std::vector<OpCase>& cases) {
  for (const OpCase& c : cases) {
    check_op(c, DType::Float32);
    check_op(c, DType::Float64);
  }
}

TEST(CudaOps, ElementwiseOpsMatchTheCpuForwardAndBackward) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  check_all(elementwise_cases());
}

// Every unary op of the table (ops/unary.h), one test each, on inputs from its domain.
class CudaUnary : public ::testing::TestWithParam<UnaryOp> {};

TEST_P(CudaUnary, MatchesTheCpuForwardAndBackward) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  const UnaryOp op = GetParam();
  const OpCase c{op.name, {kMatrix}, [fn = op.fn](const Tensors& x, const Tensors&) { return fn(x[0]); }, {},
               op.domain.low, op.domain.high};
  check_op(c, DType::Float32);
  check_op(c, DType::Float64);
}

INSTANTIATE_TEST_SUITE_P(CudaTable, CudaUnary, ::testing::ValuesIn(unary_ops().begin(), unary_ops().end()),
                         [](const ::testing::TestParamInfo<UnaryOp>& info) { return std::string(info.param.name); });

TEST(CudaOps, ReductionsMatchTheCpuForwardAndBackward) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  check_all(reduction_cases());
}

TEST(CudaOps, RowOpsMatchTheCpuForwardAndBackward) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  check_all(row_cases());
}

TEST(CudaOps, GemmOpsMatchTheCpuForwardAndBackward) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  check_all(gemm_cases());
}

TEST(CudaOps, DropoutDrawsTheCpusMask) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  const Tensor x = ones({1000, 7});
  Generator cpu_generator(5), gpu_generator(5);
  const Tensor cpu = dropout(x, 0.3, true, cpu_generator);
  const Tensor gpu = dropout(to(x, kGpu), 0.3, true, gpu_generator);
  EXPECT_EQ(gpu.to_vector<float>(), cpu.to_vector<float>());
}

TEST(CudaOps, AnOpGivenTensorsOnTwoDevicesNamesBoth) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  try {
    (void)add(ones({2}), to(ones({2}), kGpu));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
}

// A matmul with k == 0 is the empty sum, zeros, even in memory the pool
// recycled from a tensor of NaN (GEMM's beta = 0 must not read it).
TEST(CudaOps, AnEmptyInnerAxisGivesZerosInRecycledMemory) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  const Tensor a = zeros({300, 0}, DType::Float32, kGpu), b = zeros({0, 257}, DType::Float32, kGpu);
  const Tensor batch_a = zeros({4, 300, 0}, DType::Float32, kGpu), batch_b = zeros({4, 0, 257}, DType::Float32, kGpu);
  const Tensor weight = zeros({257, 0}, DType::Float32, kGpu);
  const auto in_recycled_nan = [&](int64_t numel, auto op) {
    const void* recycled = nullptr;
    {
      const Tensor junk = full({numel}, std::numeric_limits<double>::quiet_NaN(), DType::Float32, kGpu);
      recycled = junk.raw_data();
    }
    const Tensor out = op();
    EXPECT_EQ(out.raw_data(), recycled) << "the pool did not hand back the NaN block: nothing was tested";
    EXPECT_EQ(out.to_vector<float>(), std::vector<float>(static_cast<size_t>(numel), 0.0f));
  };
  in_recycled_nan(300 * 257, [&] { return matmul(a, b); });
  in_recycled_nan(4 * 300 * 257, [&] { return matmul(batch_a, batch_b); });
  in_recycled_nan(300 * 257, [&] { return linear(a, weight); });
}

TEST(CudaOps, CrossEntropyNamesABadTargetOnTheGpu) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  std::vector<int64_t> targets(300, 1);
  targets[217] = 50;
  const Tensor logits = to(uniform({300, 50}, -1, 1), kGpu);
  const std::string message = error_of([&] { (void)cross_entropy(logits, to(from_vector(targets, {300}), kGpu)); });
  EXPECT_TRUE(contains(message, "target 50 at row 217")) << message;
}

TEST(CudaOps, EmbeddingNamesAnIdOutsideTheTableOnTheGpu) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  const Tensor weight = to(uniform({500, 64}, -1, 1), kGpu);
  std::vector<int64_t> ids(300, 7);
  ids[123] = 500;
  const std::string message = error_of([&] { (void)embedding(weight, to(from_vector(ids, {3, 100}), kGpu)); });
  EXPECT_TRUE(contains(message, "id 500")) << message;
  EXPECT_TRUE(contains(message, "position (1, 23)")) << message;
  EXPECT_TRUE(contains(message, "V = 500")) << message;
}

// Backward copies the ids to the host to group them: an id written there
// after forward (behind the engine's back, so with no version bump) is
// checked again, an error naming it, never a write outside the host's arrays.
TEST(CudaOps, EmbeddingBackwardNamesAnIdThatLeftTheTableAfterForward) {
  REMAT_SKIP_WITHOUT_GPU("ops on cuda:0");
  for (const int64_t bad : {int64_t{500}, int64_t{-1}, int64_t{1} << 40}) {
    SCOPED_TRACE("id " + std::to_string(bad));
    const Tensor weight = to(uniform({500, 64}, -1, 1), kGpu).requires_grad_();
    const Tensor ids = to(random_ints(300, 500, 4, {3, 100}), kGpu);
    const Tensor out = embedding(weight, ids);
    copy_bytes(static_cast<int64_t*>(ids.raw_data()) + 123, kGpu, &bad, Device::cpu(), sizeof bad);
    const std::string message = error_of([&] { sum(out).backward(); });
    EXPECT_TRUE(contains(message, "embedding backward")) << message;
    EXPECT_TRUE(contains(message, "id " + std::to_string(bad))) << message;
    EXPECT_TRUE(contains(message, "position (1, 23)")) << message;
    EXPECT_TRUE(contains(message, "V = 500")) << message;
  }
}

}  // namespace
}  // namespace remat

#else

TEST(CudaOps, NeedACudaBuild) { GTEST_SKIP() << "this build has no CUDA (REMAT_CUDA=OFF): ops on the GPU not built"; }

#endif
