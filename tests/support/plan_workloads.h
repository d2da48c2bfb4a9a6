// The workloads and step runners the plan tests share (plan_test.cpp,
// saved_profile_test.cpp): a GPT with dropout and an MLP, each a fresh model
// with the same seed per call, stepped under a Checkpointer, with the
// keep-all gradients to compare against.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/allocator.h"
#include "nn/gpt.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "scheduler/checkpointer.h"

namespace remat::scheduler::plan_testing {

using Grads = std::vector<std::vector<float>>;

struct Step {
  Grads grads;
  StepReport report;
  GraphProfile graph;  // the profile the plan was made from
  std::optional<Plan> plan;
};

// A model's forward + loss on a fixed batch; a fresh model with the same
// seed each call, so that weights and dropout masks repeat exactly.
using Workload = std::function<std::pair<Tensor, std::vector<Tensor>>()>;

// The batch, made as a data loader makes it: data, not activations.
template <class Make>
inline Tensor as_data(Make make) {
  CategoryGuard data(MemoryCategory::Data);
  return make();
}

// GPT-2's explicit MLP by default (a gelu node between c_fc and c_proj, which
// the rule tests name); MlpPath::Fused, the models' default, where asked.
inline Workload gpt(int64_t batch = 4, nn::MlpPath mlp = nn::MlpPath::Explicit) {
  return [batch, mlp] {
    auto model = std::make_shared<nn::GPT>(nn::GPTConfig{.vocab_size = 17, .block_size = 16, .n_layer = 3,
                                                         .n_head = 2, .n_embd = 32, .dropout = 0.1, .seed = 6,
                                                         .mlp = mlp});
    Generator g(2);
    const Tensor ids = as_data([&] { return randint(17, {batch, 16}, g); });
    const Tensor targets = as_data([&] { return randint(17, {batch, 16}, g); });
    return std::pair{model->forward(ids, targets).loss, model->parameters()};
  };
}

inline Workload mlp() {
  return [] {
    Generator g(3);
    auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{64, 128, 128, 128, 10}, g);
    const Tensor x = as_data([&] { return normal({32, 64}, 0.0, 1.0, DType::Float32, g); });
    const Tensor targets = as_data([&] { return randint(10, {32}, g); });
    return std::pair{cross_entropy(model->forward(x), targets), model->parameters()};
  };
}

inline Grads grads_of(const std::vector<Tensor>& params) {
  Grads grads;
  for (const Tensor& p : params) grads.push_back(p.grad().to_vector<float>());
  return grads;
}

// `steps` steps of `workload` under `checkpointer`: each step's report, and
// the last step's grads.
inline std::pair<std::vector<StepReport>, Grads> steps_under(Checkpointer& checkpointer, const Workload& workload, int steps) {
  std::vector<StepReport> reports;
  Grads grads;
  for (int i = 0; i < steps; ++i) {
    Tensor loss;
    std::vector<Tensor> params;
    {
      const auto recording = checkpointer.record();
      std::tie(loss, params) = workload();
    }
    loss.backward();
    grads = grads_of(params);
    reports.push_back(checkpointer.report());
  }
  return {reports, grads};
}

// `steps` steps of `workload` under one checkpointer; the last step's result.
inline Step run(const Workload& workload, const PlanOptions& options, int steps = 2) {
  Checkpointer checkpointer(options);
  Step step;
  std::vector<StepReport> reports;
  std::tie(reports, step.grads) = steps_under(checkpointer, workload, steps);
  step.report = reports.back();
  if (checkpointer.plan()) step.plan = *checkpointer.plan();
  if (checkpointer.profile()) step.graph = *checkpointer.profile();
  return step;
}

inline Grads reference(const Workload& workload) {
  auto [loss, params] = workload();
  loss.backward();
  return grads_of(params);
}

inline void expect_prediction_holds(const Step& step) {
  ASSERT_TRUE(step.report.predicted_peak_bytes.has_value());
  const double predicted = static_cast<double>(*step.report.predicted_peak_bytes);
  const double measured = static_cast<double>(step.report.measured_peak_bytes);
  EXPECT_NEAR(predicted, measured, 0.02 * measured) << step.report.str();
}

}  // namespace remat::scheduler::plan_testing
