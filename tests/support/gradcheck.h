// Test support: float64 finite-difference gradient checks and small helpers
// for comparing tensors with expected values.
#pragma once

#include <functional>
#include <limits>
#include <vector>

#include "engine/tensor.h"

namespace remat::testing {

// Checks d f(inputs) / d inputs[i] for every input that requires grad:
// the analytic gradient of sum(f(inputs) * w), for a fixed random w, against
// central differences with step eps. All inputs must be float64. Returns
// the largest error relative to max(1, |numeric|) and fills `report`.
double gradcheck(const std::function<Tensor(const Tensors&)>& f, const Tensors& inputs, double eps = 1e-6,
                 std::string* report = nullptr);

// Random float64 leaf of `shape` requiring grad, values in [low, high).
Tensor random_leaf(const Shape& shape, double low = -1.0, double high = 1.0, uint64_t seed = 1);

// float32 0, 1, 2, ... in `shape`.
Tensor iota(const Shape& shape);

// actual within tol of expected, element by element (an assertion: a
// failure ends the calling helper, not the test).
void expect_close(const Tensor& actual, const Tensor& expected, double tol, const char* what);

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// A tensor's identity, for the helpers that take a transform of their input.
inline const auto kAsIs = [](const Tensor& t) { return t; };

}  // namespace remat::testing

// Asserts gradcheck's error is below tol, printing the report otherwise.
#define EXPECT_GRADIENTS_MATCH(f, inputs)                                                   \
  do {                                                                                      \
    std::string remat_report;                                                               \
    const double remat_err = ::remat::testing::gradcheck((f), (inputs), 1e-6, &remat_report); \
    EXPECT_LT(remat_err, 1e-6) << remat_report;                                             \
  } while (false)
