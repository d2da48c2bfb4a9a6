// The guided tour of autograd internals (docs/tour.md): the course's own
// example first (A and B, then C = A + B: keep them or drop them?), then a
// two-layer MLP, then one GPT block with dropout. Every line it prints is
// in the doc, and tests/examples/check_tour.py holds the two to each other,
// so the tour cannot drift from the code. Byte counts are the allocator's;
// nothing printed depends on the clock (the cost model's prices are set by
// hand in part 3, and parts 4 and 5 plan from shapes and bytes alone).
// Its twin from Python, examples/tour.py, prints the same lines.
//
//   example_tour [DIR]   (DIR: where to write the DOT of part 3)
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/factory.h"
#include "engine/file_write.h"
#include "engine/recording.h"
#include "nn/gpt.h"
#include "nn/mlp.h"
#include "ops/binary.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
#include "ops/unary.h"
#include "scheduler/checkpointer.h"
#include "scheduler/dot.h"
#include "scheduler/plan.h"
#include "scheduler/profiler.h"

namespace {
using namespace remat;

std::string kib(int64_t bytes) { return fmt::format("{} KiB", bytes / 1024); }
// Activation and temporary bytes alive now: what checkpointing saves.
int64_t live() { return cpu_allocator().stats().live_transient; }

// Tells what the engine does, as it does it: each node recorded (what its
// backward will read), replayed and run backward, with the live bytes after.
// Nodes are named in the order they are recorded.
class Narrator final : public GraphObserver {
 public:
  explicit Narrator(std::vector<std::string> names) : names_(std::move(names)) {}

  void recorded(Node& node) override {
    labels_[&node] = names_.at(labels_.size());
    std::string saves;
    for (int slot : node.record().saved) {
      if (!saves.empty()) saves += ", ";
      saves += slot == kSavedOutput ? "its output" : slot == kSavedSideResult ? "a side result"
                                                                               : fmt::format("input {}", slot);
    }
    std::printf("  forward  %-16s %-9s %s %s; live %s\n", label(node).c_str(), kib(node.record().output_bytes).c_str(),
                node.tag() == Tag::Keep ? "keep" : "drop",
                saves.empty() ? "(backward reads nothing)" : ("(backward reads " + saves + ")").c_str(),
                kib(live()).c_str());
  }
  void replayed(Node& node, bool in_place) override {
    std::printf("    replay %s%s: live %s\n", label(node).c_str(), in_place ? ", over its input" : "",
                kib(live()).c_str());
  }
  void backward_finished(Node& node, const Tensor&, const Tensors&) override {
    std::printf("  backward %-16s live %s\n", label(node).c_str(), kib(live()).c_str());
  }

 private:
  std::string label(const Node& node) const {
    const auto it = labels_.find(&node);
    return it == labels_.end() ? std::string(node.name()) : it->second;
  }
  std::vector<std::string> names_;
  std::map<const Node*, std::string> labels_;
};

// x (128, 128) and W (128, 128), made once: a layer's input that wants its
// gradient, and a weight.
struct Inputs {
  Tensor x, w;
};
Inputs make_inputs() {
  Generator g(7);
  CategoryGuard parameters(MemoryCategory::Parameter);
  return {normal({128, 128}, 0, 1, DType::Float32, g).requires_grad_(),
          normal({128, 128}, 0, 0.1, DType::Float32, g).requires_grad_()};
}

// The course's example: A = relu(x), B = tanh(x @ W), C = A + B, loss = sum(C).
Tensor abc(const Inputs& in) {
  const Tensor a = relu(in.x);
  const Tensor b = tanh(matmul(in.x, in.w));
  const Tensor c = add(a, b);
  return sum(c);
}
const std::vector<std::string> kAbcNames{"A = relu(x)", "x @ W", "B = tanh(x @ W)", "C = A + B", "loss = sum(C)"};

// One step of abc, narrated; `drop` tags those ops Recompute.
void narrate(const Inputs& in, const std::vector<std::string>& drop) {
  in.x.set_grad({});
  in.w.set_grad({});
  const auto narrator = std::make_shared<Narrator>(kAbcNames);
  Tensor loss;
  {
    GraphObserverScope listening(narrator);
    RecomputeScope tags([&](const Node& node) {
      for (const std::string& op : drop) {
        if (node.name() == op) return Tag::Recompute;
      }
      return Tag::Keep;
    });
    loss = abc(in);
  }
  std::printf("  forward done: live %s\n", kib(live()).c_str());
  loss.backward();
  std::printf("  backward done: live %s\n", kib(live()).c_str());
}

void part1(const Inputs& in) {
  std::printf("== 1. keep everything\n");
  narrate(in, {});
}

void part2(const Inputs& in) {
  std::printf("== 2. drop A and B\n");
  narrate(in, {"relu", "matmul", "tanh"});
}

// The cost model: the graph profiled, its prices set by hand (measured
// times move from run to run; these keep the page the same everywhere),
// then planned under a budget that one of A and B must go for.
void part3(const Inputs& in, const std::string& dot_dir) {
  std::printf("== 3. the cost model decides\n");
  scheduler::GraphProfile graph;
  {
    scheduler::Profiling profiling;
    const Tensor loss = abc(in);
    loss.backward();
    graph = scheduler::profile_graph(loss);
  }
  for (scheduler::NodeProfile& node : graph.nodes) {
    // A GEMM's price: 0.5 ms; an elementwise op or a sum: 0.02 ms.
    node.forward_ms = node.op == "matmul" ? 0.5 : 0.02;
    node.replay_ms = node.forward_ms;
    node.replay_in_place_ms = 0;
  }
  const std::vector<Tag> keep_all(graph.nodes.size(), Tag::Keep);
  const int64_t keep_all_peak = scheduler::simulate(graph, keep_all).peak_bytes;
  const int64_t budget = keep_all_peak - 32 * 1024;
  const scheduler::Plan plan = scheduler::make_plan(graph, {.policy = "cost", .budget = budget});
  std::printf("  keep-all peak %s; budget %s\n", kib(keep_all_peak).c_str(), kib(budget).c_str());
  // What each choice costs: drop A alone, or B alone (x @ W, which only
  // B's replay would read, goes with it).
  for (const auto& [what, ops] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"drop A", {"relu"}}, {"drop B", {"matmul", "tanh"}}}) {
    std::vector<Tag> tags = keep_all;
    for (const scheduler::NodeProfile& node : graph.nodes) {
      if (std::find(ops.begin(), ops.end(), node.op) != ops.end()) tags[static_cast<size_t>(node.position)] = Tag::Recompute;
    }
    const scheduler::Simulation sim = scheduler::simulate(graph, tags);
    std::printf("  %s: peak %s, %lld replay(s), %.2f ms of replays\n", what.c_str(), kib(sim.peak_bytes).c_str(),
                static_cast<long long>(sim.replayed_nodes), sim.recompute_ms);
  }
  std::printf("  cost's plan:\n");
  for (const scheduler::NodeProfile& node : graph.nodes) {
    const size_t v = static_cast<size_t>(node.position);
    std::printf("  %-16s %-7s %-9s %s\n", kAbcNames.at(v).c_str(), kib(node.output_bytes).c_str(),
                plan.tags[v] == Tag::Keep ? "KEEP" : "RECOMPUTE", plan.reasons[v].c_str());
  }
  if (!dot_dir.empty()) {
    write_file_atomically(dot_dir + "/abc_cost.dot", scheduler::to_dot(graph, plan));
  }
}

// One step of `loss` under `options`, its graph planned first from a
// rehearsal on the meta device: a plan made from shapes and bytes alone
// (nominal prices), the same on every machine.
scheduler::StepReport planned_step(const scheduler::PlanOptions& options, const std::function<Tensor()>& loss) {
  scheduler::Checkpointer checkpointer(options);
  auto step = [&] {
    Tensor l;
    {
      const auto recording = checkpointer.record();
      l = loss();
    }
    l.backward();
  };
  checkpointer.rehearse(step);
  step();
  return checkpointer.report();
}

// An MLP of `sizes` on a batch of 1024 rows: keep-all's peak, the least
// budget any plan meets, and cost's plan halfway between the two.
void mlp(const std::vector<int64_t>& sizes) {
  Generator g(11);
  Tensor x, labels;
  {
    CategoryGuard data(MemoryCategory::Data);
    x = normal({1024, sizes.front()}, 0, 1, DType::Float32, g);
    labels = randint(sizes.back(), {1024}, g);
  }
  nn::MLP model(sizes, g);
  auto loss = [&] { return cross_entropy(model.forward(x), labels); };
  const scheduler::StepReport all = planned_step({.policy = "none"}, loss);
  const scheduler::StepReport least = planned_step({.policy = "cost", .budget = 2 * all.measured_peak_bytes}, loss);
  std::printf("  %zu linear layers: keep all peaks at %s (predicted %s); the least budget a plan meets: %s\n",
              sizes.size() - 1, kib(all.measured_peak_bytes).c_str(), kib(*all.predicted_peak_bytes).c_str(),
              kib(*least.minimum_budget_bytes).c_str());
  if (*least.minimum_budget_bytes >= all.measured_peak_bytes) return;
  const int64_t budget = (*least.minimum_budget_bytes + all.measured_peak_bytes) / 2;
  const scheduler::StepReport cost = planned_step({.policy = "cost", .budget = budget}, loss);
  std::printf("  cost within %s: kept %s, dropped %s, peak %s (predicted %s), %lld replays\n", kib(budget).c_str(),
              kib(cost.kept_bytes).c_str(), kib(cost.dropped_bytes).c_str(), kib(cost.measured_peak_bytes).c_str(),
              kib(*cost.predicted_peak_bytes).c_str(), static_cast<long long>(cost.replayed_nodes));
}

void part4() {
  std::printf("== 4. a two-layer MLP, then a deeper one\n");
  mlp({64, 256, 10});
  mlp({64, 256, 256, 256, 256, 10});
}

// Every parameter's gradient, in order.
std::vector<std::vector<float>> gradients(nn::Module& model) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, p] : model.named_parameters()) out.push_back(p.grad().to_vector<float>());
  return out;
}

void part5() {
  std::printf("== 5. one GPT block with dropout\n");
  Generator g(5);
  Tensor ids, targets;
  {
    CategoryGuard data(MemoryCategory::Data);
    ids = randint(64, {8, 32}, g);
    targets = randint(64, {8, 32}, g);
  }
  const nn::GPTConfig config{.vocab_size = 64, .block_size = 32, .n_layer = 1, .n_head = 2, .n_embd = 64,
                             .dropout = 0.1, .seed = 3};
  nn::GPT kept(config), replayed(config);  // the same weights, the same dropout stream
  replayed.gradient_checkpointing_enable({.policy = "blocks"});
  // Two steps each: the first profiles the graph (under blocks), the
  // second runs under its plan; gradients are compared after the second.
  for (nn::GPT* model : {&kept, &replayed}) {
    for (int step = 0; step < 2; ++step) {
      for (const Tensor& p : model->parameters()) p.set_grad({});
      model->forward(ids, targets).loss.backward();
    }
  }
  // The dropouts the plan drops: their masks are drawn again when replayed.
  const scheduler::GraphProfile& graph = *replayed.checkpointing_profile();
  const std::vector<Tag> tags = scheduler::effective_tags(graph, replayed.checkpointing_plan()->tags);
  int dropouts = 0, dropped = 0;
  for (const scheduler::NodeProfile& node : graph.nodes) {
    if (node.op != "dropout") continue;
    ++dropouts;
    dropped += tags[static_cast<size_t>(node.position)] == Tag::Recompute ? 1 : 0;
  }
  std::printf("  blocks: %lld replays; the plan drops %d of the %d dropouts\n",
              static_cast<long long>(replayed.checkpointing_report()->replayed_nodes), dropped, dropouts);
  std::printf("  every gradient bit-identical to keeping everything: %s\n",
              gradients(kept) == gradients(replayed) ? "yes" : "NO");
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines in order with any error
  const std::string dot_dir = argc > 1 ? argv[1] : "";
  const Inputs in = make_inputs();
  part1(in);
  part2(in);
  part3(in, dot_dir);
  part4();
  part5();
}
