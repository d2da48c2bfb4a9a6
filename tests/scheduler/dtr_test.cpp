// Policy dtr (scheduler/policies/dtr.h) through the Checkpointer and
// Module::gradient_checkpointing_enable: gradients bit-identical to keep-all
// at several budgets (an MLP; a GPT with dropout), measured peaks within
// the budget whenever nothing had to go over it (and never above the
// budget plus the excess reported), shapes that change between steps, an
// impossible budget reported, and the same evictions on every run. The
// random graphs of random_graph_test.cpp run under dtr there.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <vector>

#include "nn/gpt.h"
#include "nn/mlp.h"
#include "ops/ops.h"
#include "scheduler/checkpointer.h"
#include "scheduler/plan.h"
#include "scheduler/policies/dtr.h"
#include "tests/support/errors.h"

namespace remat::scheduler {
namespace {

struct Outcome {
  std::vector<std::vector<float>> grads;
  StepReport report;  // when checkpointing was on
  float loss = 0;
};

std::vector<std::vector<float>> module_grads(const nn::Module& model) {
  std::vector<std::vector<float>> grads;
  for (const Tensor& p : model.parameters()) grads.push_back(p.grad().to_vector<float>());
  return grads;
}

void zero_grads(const nn::Module& model) {
  for (const Tensor& p : model.parameters()) p.set_grad(Tensor());
}

// One step per batch size of a fresh MLP (same weights, same batches on
// every call) under `options`, or with no checkpointing at all.
std::vector<Outcome> mlp_steps(const std::optional<PlanOptions>& options, const std::vector<int64_t>& batches) {
  Generator init(11);
  nn::MLP model({32, 96, 96, 96, 96, 96, 96, 96, 96, 96, 96, 96, 96, 10}, init);  // 12 hidden layers
  if (options) model.gradient_checkpointing_enable(*options);
  Generator data(12);
  std::vector<Outcome> outcomes;
  for (const int64_t batch : batches) {
    const Tensor x = normal({batch, 32}, 0, 1, DType::Float32, data);
    const Tensor y = randint(10, {batch}, data);
    zero_grads(model);
    const Tensor loss = cross_entropy(model.forward(x), y);
    loss.backward();
    Outcome outcome{.grads = module_grads(model), .loss = loss.item<float>()};
    if (options) outcome.report = *model.checkpointing_report();
    outcomes.push_back(std::move(outcome));
  }
  return outcomes;
}

int64_t share(double fraction, int64_t bytes) {
  return std::max<int64_t>(1, std::llround(fraction * static_cast<double>(bytes)));
}

// What every dtr step must hold, whatever the budget: the peak never passes
// the budget by more than the excess the step reported, and with no
// allocation over budget it stays within the budget.
void expect_within_budget(const StepReport& report, int64_t budget) {
  EXPECT_LE(report.measured_peak_bytes, budget + report.max_over_budget_bytes) << report.str();
  if (report.over_budget_allocations == 0) { EXPECT_LE(report.measured_peak_bytes, budget) << report.str(); }
  EXPECT_EQ(report.over_budget_allocations == 0, report.max_over_budget_bytes == 0) << report.str();
}

// At batch 256 a hidden value is 96 KiB and a weight gradient 36 KiB: a
// linear layer's backward needs its incoming gradient, its input, dW and
// dx at once (324 KiB), about a quarter of keep-all's peak over 12 hidden
// layers; budgets from 0.4 up never go over, 0.2 must.
TEST(Dtr, MlpGradientsAreBitIdenticalToKeepAllAtSeveralBudgets) {
  const std::vector<Outcome> plain = mlp_steps(std::nullopt, {256, 256});
  const std::vector<Outcome> kept = mlp_steps(PlanOptions{.policy = "none"}, {256, 256});
  const int64_t keep_all_peak = kept[1].report.measured_peak_bytes;
  ASSERT_GT(keep_all_peak, 0);
  for (const double fraction : {0.2, 0.4, 0.6, 0.8, 1.0}) {
    SCOPED_TRACE(fmt::format("budget {} of keep-all's {} bytes", fraction, keep_all_peak));
    const int64_t budget = share(fraction, keep_all_peak);
    const std::vector<Outcome> dtr = mlp_steps(PlanOptions{.policy = "dtr", .budget = budget}, {256, 256});
    for (size_t step = 0; step < dtr.size(); ++step) {
      EXPECT_EQ(dtr[step].grads, plain[step].grads);
      EXPECT_EQ(dtr[step].loss, plain[step].loss);
      const StepReport& report = dtr[step].report;
      expect_within_budget(report, budget);
      EXPECT_EQ(report.over_budget_allocations > 0, fraction < 0.3) << report.str();
      if (fraction < 1) {
        EXPECT_GT(report.evictions, 0) << report.str();
        EXPECT_GT(report.rebuilds, 0) << report.str();
        EXPECT_GT(report.replayed_nodes, 0) << report.str();
      }
      EXPECT_FALSE(report.profiling);
    }
  }
}

TEST(Dtr, ASmallerBudgetEvictsMoreAndRebuildsMore) {
  const int64_t keep_all_peak = mlp_steps(PlanOptions{.policy = "none"}, {256}).front().report.measured_peak_bytes;
  const StepReport loose =
      mlp_steps(PlanOptions{.policy = "dtr", .budget = share(0.75, keep_all_peak)}, {256}).front().report;
  const StepReport tight =
      mlp_steps(PlanOptions{.policy = "dtr", .budget = share(0.4, keep_all_peak)}, {256}).front().report;
  EXPECT_LT(tight.measured_peak_bytes, loose.measured_peak_bytes);
  EXPECT_GT(tight.evicted_bytes, loose.evicted_bytes);
  EXPECT_GE(tight.rebuilds, loose.rebuilds);
}

TEST(Dtr, EvictionsAreTheSameOnEveryRun) {
  const int64_t keep_all_peak = mlp_steps(PlanOptions{.policy = "none"}, {256}).front().report.measured_peak_bytes;
  const PlanOptions options{.policy = "dtr", .budget = share(0.4, keep_all_peak)};
  const StepReport first = mlp_steps(options, {256}).front().report;
  const StepReport second = mlp_steps(options, {256}).front().report;
  EXPECT_EQ(first.measured_peak_bytes, second.measured_peak_bytes);
  EXPECT_EQ(first.evictions, second.evictions);
  EXPECT_EQ(first.evicted_bytes, second.evicted_bytes);
  EXPECT_EQ(first.rebuilds, second.rebuilds);
  EXPECT_EQ(first.recompute_flops, second.recompute_flops);
}

TEST(Dtr, ShapesThatChangeBetweenStepsNeedNothingSpecial) {
  const std::vector<int64_t> batches{64, 256, 64, 256};
  const std::vector<Outcome> plain = mlp_steps(std::nullopt, batches);
  const int64_t keep_all_peak = mlp_steps(PlanOptions{.policy = "none"}, {256}).front().report.measured_peak_bytes;
  const int64_t budget = share(0.5, keep_all_peak);
  const std::vector<Outcome> dtr = mlp_steps(PlanOptions{.policy = "dtr", .budget = budget}, batches);
  for (size_t step = 0; step < batches.size(); ++step) {
    SCOPED_TRACE(fmt::format("step {} batch {}", step + 1, batches[step]));
    EXPECT_EQ(dtr[step].grads, plain[step].grads);
    const StepReport& report = dtr[step].report;
    EXPECT_EQ(report.step, static_cast<int64_t>(step) + 1);
    EXPECT_FALSE(report.profiling);  // never a profiling step: nothing to plan
    EXPECT_EQ(report.over_budget_allocations, 0) << report.str();
    EXPECT_LE(report.measured_peak_bytes, budget) << report.str();
    if (batches[step] == 256) { EXPECT_GT(report.evictions, 0) << report.str(); }
  }
}

TEST(Dtr, AnImpossibleBudgetGoesOverAndSaysSo) {
  const std::vector<Outcome> plain = mlp_steps(std::nullopt, {256});
  const std::vector<Outcome> dtr = mlp_steps(PlanOptions{.policy = "dtr", .budget = 1024}, {256});
  EXPECT_EQ(dtr[0].grads, plain[0].grads);
  const StepReport& report = dtr[0].report;
  EXPECT_GT(report.over_budget_allocations, 0);
  EXPECT_GT(report.max_over_budget_bytes, 0);
  EXPECT_GT(report.measured_peak_bytes, 1024);
  expect_within_budget(report, 1024);
  EXPECT_TRUE(testing::contains(report.str(), "over budget")) << report.str();
}

TEST(Dtr, NeedsABudgetAndMakesNoPlan) {
  EXPECT_TRUE(testing::contains(testing::error_of([] { Checkpointer checkpointer({.policy = "dtr"}); }),
                                "policy dtr needs a positive budget"));
  EXPECT_TRUE(testing::contains(testing::error_of([] { make_plan(GraphProfile{}, {.policy = "dtr", .budget = 64}); }),
                                "policy dtr makes no plan"));
  // A rehearsal plans nothing either (it finds the budget's floor: below).
  Generator init(11);
  nn::MLP model({32, 96, 96, 10}, init);
  model.gradient_checkpointing_enable({.policy = "dtr", .budget = 1 << 20});
  Generator data(12);
  const Tensor x = normal({64, 32}, 0, 1, DType::Float32, data);
  const Tensor y = randint(10, {64}, data);
  model.rehearse_checkpointing([&] { cross_entropy(model.forward(x), y).backward(); });
  EXPECT_EQ(model.checkpointing_plan(), nullptr);
  EXPECT_EQ(model.parameters()[0].grad().defined(), false);  // nothing computed
}

// A budget below what one node needs at once (its output and the values it
// reads) cannot hold under any eviction: the rehearsal before the first
// step refuses it, naming the floor and the node; at the floor it passes.
TEST(Dtr, ABudgetBelowTheFloorIsRefusedByTheRehearsal) {
  Generator data(12);
  const Tensor x = normal({64, 32}, 0, 1, DType::Float32, data);
  const Tensor y = randint(10, {64}, data);
  const auto rehearse_at = [&](int64_t budget) {
    Generator init(11);
    nn::MLP model({32, 96, 96, 10}, init);
    model.gradient_checkpointing_enable({.policy = "dtr", .budget = budget});
    try {
      model.rehearse_checkpointing([&] { cross_entropy(model.forward(x), y).backward(); });
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string message = rehearse_at(1);
  EXPECT_TRUE(testing::contains(message, "policy dtr's budget of 1 bytes")) << message;
  const std::string at_least = "give a budget of at least ";
  const size_t at = message.find(at_least);
  ASSERT_NE(at, std::string::npos) << message;
  const int64_t floor = std::stoll(message.substr(at + at_least.size()));
  // A (64, 96) float32 output and the (64, 96) it reads: 2 x 24 KiB at least.
  EXPECT_GE(floor, 2 * 64 * 96 * 4) << message;
  EXPECT_TRUE(testing::contains(message, "node '")) << message;
  EXPECT_TRUE(testing::contains(rehearse_at(floor - 1), "cannot hold this step"));
  EXPECT_EQ(rehearse_at(floor), "no error");
}

// GPT (2 blocks, dropout 0.2): two steps, so that the second draws new
// masks; each replay redraws its step's own.
std::vector<std::vector<std::vector<float>>> gpt_steps(const std::optional<PlanOptions>& options,
                                                       std::vector<StepReport>* reports = nullptr) {
  nn::GPT model({.vocab_size = 17, .block_size = 12, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0.2,
                 .seed = 4});
  if (options) model.gradient_checkpointing_enable(*options);
  Generator g(8);
  const Tensor ids = randint(17, {3, 12}, g), targets = randint(17, {3, 12}, g);
  std::vector<std::vector<std::vector<float>>> grads;
  for (int step = 0; step < 2; ++step) {
    zero_grads(model);
    model.forward(ids, targets).loss.backward();
    grads.push_back(module_grads(model));
    if (reports) reports->push_back(*model.checkpointing_report());
  }
  return grads;
}

// So small a GPT's weight gradients set what a step needs at least: 0.3 of
// keep-all goes over (and stays bit-identical), 0.5 and 0.8 fit.
TEST(Dtr, GptWithDropoutIsBitIdenticalToKeepAll) {
  const auto plain = gpt_steps(std::nullopt);
  std::vector<StepReport> kept;
  gpt_steps(PlanOptions{.policy = "none"}, &kept);
  const int64_t keep_all_peak = kept[1].measured_peak_bytes;
  for (const double fraction : {0.3, 0.5, 0.8}) {
    SCOPED_TRACE(fmt::format("budget {} of keep-all's {} bytes", fraction, keep_all_peak));
    const int64_t budget = share(fraction, keep_all_peak);
    std::vector<StepReport> reports;
    EXPECT_EQ(gpt_steps(PlanOptions{.policy = "dtr", .budget = budget}, &reports), plain);
    for (const StepReport& report : reports) {
      expect_within_budget(report, budget);
      EXPECT_EQ(report.over_budget_allocations > 0, fraction < 0.4) << report.str();
      EXPECT_GT(report.evictions, 0) << report.str();
      EXPECT_GT(report.rebuilds, 0) << report.str();
    }
  }
}

// The policy's own choice: of two candidates alike but for staleness, the
// staler goes; alike but for bytes, the larger; and the cost counts the
// evicted ancestors (e*) only with the neighbourhood on.
TEST(Dtr, TheHeuristicPrefersStaleLargeCheapValues) {
  Generator g(9);
  const Tensor w = normal({8, 8}, 0, 1, DType::Float32, g).requires_grad_();
  const auto pool = make_dtr_pool(1 << 30, Device::cpu());
  RecomputeScope scope(pool);
  pool->begin_step();
  const Tensor a = exp(w), b = exp(w);
  Node* an = a.grad_fn().get();
  Node* bn = b.grad_fn().get();
  const DtrPolicy policy;
  const EvictionCandidate stale{.nodes = {an}, .bytes = 256, .last_access = 1};
  const EvictionCandidate fresh{.nodes = {bn}, .bytes = 256, .last_access = pool->now()};
  EXPECT_EQ(DtrPolicy().choose({fresh, stale}, *pool), 1u);
  const EvictionCandidate large{.nodes = {bn}, .bytes = 1024, .last_access = pool->now()};
  EXPECT_EQ(DtrPolicy().choose({fresh, large}, *pool), 1u);
  EXPECT_GT(policy.replay_ms(*an), 0);
  EXPECT_EQ(policy.rebuild_cost_ms(stale), policy.replay_ms(*an));  // no evicted ancestor
}

TEST(Dtr, TheNeighbourhoodCountsEvictedAncestors) {
  Generator g(10);
  const Tensor w = normal({8, 8}, 0, 1, DType::Float32, g).requires_grad_();
  const auto pool = make_dtr_pool(1, Device::cpu());  // evicts whatever it can
  RecomputeScope scope(pool);
  pool->begin_step();
  Tensor c = exp(w);
  const std::shared_ptr<Node> cn = c.grad_fn();
  const Tensor d = exp(c);
  c = Tensor();
  const Tensor e = exp(w);  // evicts c, the only candidate
  ASSERT_TRUE(cn->evicted());
  const EvictionCandidate of_d{.nodes = {d.grad_fn().get()}, .bytes = 256, .last_access = pool->now()};
  const DtrPolicy with({.neighbourhood = true}), without({.neighbourhood = false});
  EXPECT_EQ(without.rebuild_cost_ms(of_d), without.replay_ms(*d.grad_fn()));
  EXPECT_EQ(with.rebuild_cost_ms(of_d), with.replay_ms(*d.grad_fn()) + with.replay_ms(*cn));
}

}  // namespace
}  // namespace remat::scheduler
