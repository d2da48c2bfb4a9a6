// Finite-difference gradient checks and the small comparison helpers; see
// gradcheck.h.
#include "tests/support/gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/ops.h"

namespace remat::testing {

Tensor random_leaf(const Shape& shape, double low, double high, uint64_t seed) {
  Generator generator(seed);
  Tensor t = uniform(shape, low, high, DType::Float64, generator);
  t.requires_grad_();
  return t;
}

double gradcheck(const std::function<Tensor(const Tensors&)>& f, const Tensors& inputs, double eps,
                 std::string* report) {
  for (const Tensor& x : inputs) {
    REMAT_CHECK(x.dtype() == DType::Float64 || x.dtype() == DType::Int64, "gradcheck: inputs must be float64, got {}",
                x.str());
  }
  // A fixed random projection makes every output element matter.
  Tensor probe = f(inputs);
  Generator generator(1234);
  const Tensor weights = uniform(probe.shape(), 0.5, 1.5, DType::Float64, generator);
  auto objective = [&](const Tensors& xs) { return sum(mul(f(xs), weights)); };

  for (const Tensor& x : inputs) {
    if (x.requires_grad()) x.set_grad(Tensor());
  }
  objective(inputs).backward();

  double worst = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.requires_grad()) continue;
    const std::vector<double> analytic = x.grad().defined() ? x.grad().to_vector<double>()
                                                            : std::vector<double>(static_cast<size_t>(x.numel()), 0.0);
    // Perturb a dense copy element by element (handles any strides of x).
    Tensor base = contiguous_copy(x);
    double* data = base.data<double>();
    for (int64_t j = 0; j < x.numel(); ++j) {
      const double saved = data[j];
      NoGradGuard no_grad;
      Tensors shifted = inputs;
      data[j] = saved + eps;
      shifted[i] = base.alias(x.shape(), contiguous_strides(x.shape()), 0);
      const double up = objective(shifted).item<double>();
      data[j] = saved - eps;
      const double down = objective(shifted).item<double>();
      data[j] = saved;
      const double numeric = (up - down) / (2 * eps);
      const double err = std::abs(numeric - analytic[static_cast<size_t>(j)]) / std::max(1.0, std::abs(numeric));
      if (err > worst && report) {
        *report = fmt::format("input {} element {}: analytic {} numeric {}", i, j, analytic[static_cast<size_t>(j)],
                              numeric);
      }
      worst = std::max(worst, err);
    }
  }
  return worst;
}

Tensor iota(const Shape& shape) {
  std::vector<float> values(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  return from_vector(values, shape);
}

void expect_close(const Tensor& actual, const Tensor& expected, double tol, const char* what) {
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], e[i], tol) << what << ", element " << i;
}

}  // namespace remat::testing
